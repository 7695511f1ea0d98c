import { existsSync } from 'node:fs';
import { readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance } from '../../ducklake/node-api.js';
import { currentSnapshot } from '../../ducklake/reader.js';
import { expireSnapshots, filesToDelete, forgetDeletedFiles } from '../../ducklake/writer.js';
import type { Network } from '../../datasets/dataset.js';
import { Catalog, TABLES } from '../catalog.js';
import { journalFor, lakeStateFor, replacedTables } from './commit-run.js';
import { preparedFile, rewritePartition, type ClearedPartition, type PreparedFile } from './commit.js';
import { compactedShapes, compactionTargets, compactRun, countBefore, emptyCompactReport, type CompactReport } from './compaction.js';
import { writeMergedPartition } from './merge.js';
import { fsyncFile, mkdirDurable } from './durable.js';
import { openEngine, type Engine } from '../engine.js';
import { decideAndApply, preparedAgain } from './journal.js';
import type { LakeChangedError } from '../../ducklake/conflicts.js';
import { LakeLock } from '../lock.js';
import type { LakePaths } from '../paths.js';
import { recoverLake, type RecoveryReport } from './recovery.js';
import { lakeShapes, type TableShape } from '../schema.js';
import { lakeTableShapes } from '../ledger/declared-tables.js';
import { literal } from '../sql.js';
import { openRunStaging, closeRunStaging } from './staging.js';
import { newMaintenanceId } from '../ids.js';
import { catalogProblem, salvageCatalog, type SalvageReport } from './salvage.js';

export interface PartitionRef {
  shape: TableShape;
  network: Network;
  value: string;
  /** Absolute paths. */
  files: string[];
}

/**
 * The partitions of a table as folders on disk, whatever wrote them: the DuckLake layout
 * (`main/<table>/network=…/<column>=…/`, files of every snapshot kept) and the layout of chainlake before the
 * lake was a DuckLake (`<table>/network=…/<column>=…/data.parquet`).
 */
export async function diskPartitions(paths: LakePaths, shape: TableShape): Promise<PartitionRef[]> {
  const out: PartitionRef[] = [];
  for (const root of [paths.datasetDir(shape.name), paths.legacyDatasetDir(shape.name)]) {
    for (const net of (await readdir(root).catch(() => [] as string[])).sort()) {
      if (!net.startsWith('network=')) continue;
      const prefix = `${shape.partition}=`;
      for (const part of (await readdir(path.join(root, net)).catch(() => [] as string[])).sort()) {
        if (!part.startsWith(prefix)) continue;
        const dir = path.join(root, net, part);
        const files = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith('.parquet')).map((n) => path.join(dir, n));
        if (files.length) out.push({ shape, network: net.slice('network='.length) as Network, value: decodeURIComponent(part.slice(prefix.length)), files });
      }
    }
  }
  return out;
}

/** Runs `fn` under the lake lock, after recovery, with an engine whose spill folder is under the lake's staging. */
async function maintain<T>(
  paths: LakePaths,
  what: string,
  fn: (engine: Engine, id: string, staging: string, recovery: RecoveryReport) => Promise<T>,
  /** Runs under the lock before recovery opens the catalog (a damaged catalog's salvage). */
  first?: () => Promise<void>,
): Promise<T> {
  const id = newMaintenanceId(what);
  const lock = await LakeLock.acquire(paths.root, id);
  try {
    await first?.();
    const recovery = await recoverLake(paths, { currentRunId: id, by: id });
    const staging = paths.staging(id);
    await openRunStaging(staging, { runId: id, job: `(${what})`, startedAt: new Date().toISOString(), pid: process.pid });
    const engine = await openEngine({ tempDir: path.join(staging, 'duckdb-tmp') });
    try {
      return await fn(engine, id, staging, recovery);
    } finally {
      engine.close();
      await closeRunStaging(staging);
    }
  } finally {
    await lock.release();
  }
}

/** Partitions rewritten per commit: bounds the staging disk a compaction needs at once. */
const COMPACT_BATCH = 64;

/**
 * Rewrites the partitions that are not compact (compactionTargets) into their canonical form: one file per
 * partition, one row per natural key, the table's columns and types, sorted, ZSTD. Commits in batches through the
 * same journaled protocol as a run, so it is atomic for catalog readers and crash-safe; the rows a reader sees do
 * not change, except duplicates that disappear. The files replaced stay for the snapshots before until
 * `chainlake maintain` expires them.
 */
export async function compactLake(
  paths: LakePaths,
  opts: {
    datasets?: readonly string[];
    /** Hears each time a batch is merged again (another DuckLake writer changed its tables meanwhile). */
    again?: (error: LakeChangedError, next: number) => void;
  } = {},
): Promise<CompactReport> {
  return maintain(paths, 'compact', async (engine, id, staging) => {
    const report = emptyCompactReport(id);
    const startedAt = new Date().toISOString();
    const shapes = compactedShapes(await Catalog.hold(paths, (c) => lakeTableShapes({ db: c.lake })), opts.datasets);
    // A partition another DuckLake writer changed in the catalog (inlined rows, deletes) is written out to be merged.
    let lake = await lakeStateFor(paths, [], path.join(staging, 'lake-rows'), shapes);
    const { targets, alreadyCompact } = compactionTargets(lake, shapes);
    // Where the partitions were read; each batch's own snapshot after (nothing else committed in between).
    let readAt = lake.snapshotId;
    report.alreadyCompact = alreadyCompact;
    countBefore(report, targets);
    for (let i = 0; i < targets.length; i += COMPACT_BATCH) {
      const batch = i / COMPACT_BATCH;
      const last = i + COMPACT_BATCH >= targets.length;
      // Another DuckLake writer's commit to a table since it was read: the batch is merged again from the lake's new
      // rows (the same partitions), as a run's commit is; the batches before stay compacted.
      const after = await preparedAgain(
        (n) => path.join(staging, n === 1 ? `batch-${batch}` : `batch-${batch}-${n}`),
        async (workDir, n) => {
          if (n > 1) {
            lake = await lakeStateFor(paths, [], path.join(workDir, 'lake-rows'), shapes);
            readAt = lake.snapshotId;
          }
          await mkdirDurable(workDir);
          const prepared: PreparedFile[] = [];
          const cleared: ClearedPartition[] = [];
          const made = { files: 0, rows: 0, bytes: 0 };
          for (const t of targets.slice(i, i + COMPACT_BATCH)) {
            const prep = await rewritePartition({ engine, paths, lake, shape: t.shape, network: t.network, partition: t.value, workDir });
            if (!('from' in prep)) {
              cleared.push(prep);
              continue;
            }
            prepared.push(prep);
            made.files++;
            made.rows += prep.file.rows;
            made.bytes += prep.file.bytes;
          }
          const withBatch = {
            ...report,
            filesAfter: report.filesAfter + made.files,
            rowsAfter: report.rowsAfter + made.rows,
            bytesAfter: report.bytesAfter + made.bytes,
          };
          const snapshot = await decideAndApply(paths, { snapshot: readAt, tables: replacedTables(lake, prepared, cleared) }, () =>
            journalFor(paths, `${id}/${path.basename(workDir)}`, id, prepared, {
              ...(last ? { run: compactRun(withBatch, startedAt) } : {}),
              windows: [],
              watermarks: [],
              ...(cleared.length ? { cleared } : {}),
            }),
          );
          return { withBatch, snapshot };
        },
        {
          ...(opts.again ? { again: opts.again } : {}),
          runAgain: `compact committed ${batch} of its ${Math.ceil(targets.length / COMPACT_BATCH)} batches before; running it again compacts the partitions left`,
        },
      );
      Object.assign(report, after.withBatch);
      readAt = after.snapshot ?? readAt;
    }
    if (targets.length === 0) await Catalog.write(paths, (c) => c.refreshViews());
    else report.snapshotId = await Catalog.hold(paths, async (c) => (await currentSnapshot(c.lake)).snapshotId);
    report.prunedDirs = await pruneEmptyPartitionDirs(paths, shapes);
    return report;
  });
}

/** Folders a killed commit created but never filled (harmless, but clutter). */
async function pruneEmptyPartitionDirs(paths: LakePaths, shapes: TableShape[]): Promise<number> {
  let n = 0;
  for (const s of shapes) {
    const root = paths.datasetDir(s.name);
    for (const net of await readdir(root).catch(() => [] as string[])) {
      for (const part of await readdir(path.join(root, net)).catch(() => [] as string[])) {
        const dir = path.join(root, net, part);
        if ((await readdir(dir).catch(() => ['?'])).length === 0) {
          await rm(dir, { recursive: true, force: true });
          n++;
        }
      }
    }
  }
  return n;
}

export interface RebuildReport {
  runId: string;
  recovery: RecoveryReport;
  /** Files of the lake's newest snapshot after the rebuild. */
  files: number;
  /** Partitions rebuilt from the files on disk (a lost or damaged catalog, or a lake of the layout before DuckLake). */
  partitionsFromDisk: number;
  /** Files read from disk and replaced by the rebuilt partitions' files (deleted). */
  filesReplaced: number;
  /** Folders on disk of tables the catalog does not declare (decoded datasets whose declaration was lost): left as they are. */
  unknownTables: string[];
  /** Set when the catalog was missing or damaged: what was carried over and what was lost. */
  salvage?: SalvageReport;
}

/** A catalog of the layout before the lake was a DuckLake: it has a `files` table. */
async function legacyCatalog(paths: LakePaths): Promise<boolean> {
  if (!existsSync(paths.catalog)) return false;
  const instance = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
  const conn = await instance.connect();
  try {
    await conn.run(`ATTACH ${literal(paths.catalog)} AS c (READ_ONLY)`);
    const r = await conn.runAndReadAll(`SELECT 1 FROM duckdb_tables() WHERE database_name = 'c' AND table_name = 'files'`);
    return r.getRowsJS().length > 0;
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
}

/**
 * Makes a lake queryable again. A sound catalog only gets its views rebuilt (at the lake's current absolute
 * path). When the catalog is missing or damaged, or the lake was written before it became a DuckLake, the
 * DuckLake is rebuilt from the files on disk: each partition folder's files (of every snapshot the lost catalog
 * had, or the old layout's data.parquet) are merged into one new file (one row per natural key, the newest
 * `_ingested_at` winning: what the lost catalog's newest snapshot held), committed through the journaled
 * protocol, and the files read are deleted. Runs, windows and watermarks are history and are kept.
 */
export async function rebuildCatalog(paths: LakePaths): Promise<RebuildReport> {
  const found: { salvage?: SalvageReport; fromDisk: boolean } = { fromDisk: false };
  const report = await maintain(
    paths,
    'catalog-rebuild',
    async (engine, id, staging, recovery): Promise<Omit<RebuildReport, 'salvage'>> => {
      const { shapes, pending } = await Catalog.hold(paths, async (c) => ({
        shapes: await lakeTableShapes({ db: c.lake }),
        pending: (await c.meta(FROM_DISK_KEY)) !== undefined,
      }));
      const out = { runId: id, recovery, files: 0, partitionsFromDisk: 0, filesReplaced: 0, unknownTables: [] as string[] };
      if (found.fromDisk || pending) {
        out.unknownTables = await unknownTableFolders(paths, shapes);
        Object.assign(out, await rebuildFromDisk(paths, engine, id, staging, shapes));
      }
      return Catalog.write(paths, async (c) => {
        await c.refreshViews({ force: true });
        const lake = await c.lakeState();
        return { ...out, files: lake.all().reduce((n, t) => n + [...t.partitions.values()].reduce((m, f) => m + f.length, 0), 0) };
      });
    },
    async () => {
      Object.assign(found, await catalogToRebuild(paths));
    },
  );
  return { ...report, salvage: found.salvage };
}

/**
 * What a rebuild starts from: a missing or damaged catalog is salvaged (what it can give is carried over) and
 * the lake is rebuilt from disk; a catalog of the layout before DuckLake loses its `files` table (derived from
 * the files, which are read again) and is rebuilt from disk too, as is a lake whose conversion was killed half-way.
 */
async function catalogToRebuild(paths: LakePaths): Promise<{ salvage?: SalvageReport; fromDisk: boolean }> {
  const problem = await catalogProblem(paths);
  if (problem) return { salvage: await salvageCatalog(paths, problem, TABLES), fromDisk: true };
  if (await legacyCatalog(paths)) {
    const instance = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
    const conn = await instance.connect();
    try {
      await conn.run(`ATTACH ${literal(paths.catalog)} AS c`);
      await conn.run('DROP TABLE c.main.files');
      await conn.run(`DELETE FROM c.main.lake_meta WHERE key LIKE 'view:%'`);
    } finally {
      conn.closeSync();
      instance.closeSync();
    }
    return { fromDisk: true };
  }
  // A conversion killed half-way left folders of the old layout: they are read again.
  return { fromDisk: lakeShapes().some((shape) => existsSync(paths.legacyDatasetDir(shape.name))) };
}

/** Folders on disk holding partitions of tables the catalog does not declare: left as they are, and reported. */
async function unknownTableFolders(paths: LakePaths, shapes: readonly TableShape[]): Promise<string[]> {
  const known = new Set(shapes.map((s) => s.name));
  const unknown: string[] = [];
  for (const dir of [paths.tablesRoot, paths.root]) {
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      if (known.has(name) || name.startsWith('_staging') || name.startsWith('.') || name === 'main' || name.startsWith('catalog.duckdb')) continue;
      if ((await readdir(path.join(dir, name)).catch(() => [] as string[])).some((n) => n.startsWith('network='))) unknown.push(name);
    }
  }
  return unknown;
}

/**
 * lake_meta's mark of a rebuild from disk begun and not finished (killed, or failed on another DuckLake writer's
 * commits): the catalog is sound again, but partitions on disk are not in it yet, so the next rebuild reads the disk too.
 */
const FROM_DISK_KEY = 'rebuild-from-disk';

/**
 * Every partition folder's files merged into one new file per partition, committed through the journaled
 * protocol `COMPACT_BATCH` partitions at a time; the files read are deleted once their batch is committed, but for
 * those the catalog names (older snapshots' until they expire).
 */
async function rebuildFromDisk(
  paths: LakePaths,
  engine: Engine,
  id: string,
  staging: string,
  shapes: readonly TableShape[],
): Promise<{ partitionsFromDisk: number; filesReplaced: number }> {
  // Partitions another DuckLake writer changed in the catalog (inlined rows, deletes) are written out to be merged.
  let lake = await lakeStateFor(paths, shapes, path.join(staging, 'lake-rows'));
  let readAt = lake.snapshotId;
  const listed = await Catalog.write(paths, async (c) => {
    await c.lake.query(`INSERT OR REPLACE INTO lake_meta VALUES ('${FROM_DISK_KEY}', $1)`, [id]);
    return c.listedFiles();
  });
  const todo = await diskPartitionsOf(paths, shapes);
  const done = { partitionsFromDisk: 0, filesReplaced: 0 };
  for (let i = 0; i < todo.length; i += COMPACT_BATCH) {
    const chunk = todo.slice(i, i + COMPACT_BATCH);
    const batch = i / COMPACT_BATCH;
    // Another DuckLake writer may commit to the rebuilt catalog meanwhile: the batch's commit would end its rows (the
    // partitions' current files and inlined rows) unread, so it is refused, and merged again from the lake's new rows.
    const snapshot = await preparedAgain(
      (n) => path.join(staging, n === 1 ? `batch-${batch}` : `batch-${batch}-${n}`),
      async (workDir, n) => {
        if (n > 1) {
          lake = await lakeStateFor(paths, shapes, path.join(workDir, 'lake-rows'));
          readAt = lake.snapshotId;
        }
        await mkdirDurable(workDir);
        const prepared: PreparedFile[] = [];
        for (const p of chunk) {
          const from = path.join(workDir, `${p.shape.name}.${p.network}.${p.value}.parquet`);
          // The files on disk, and the partition's rows as the lake reads them now (another writer's among them).
          const current = lake.files(p.shape.name, p.network, p.value).map((f) => f.path);
          const written = await writeMergedPartition(
            engine.conn,
            lake.table(p.shape.name),
            p.shape,
            { network: p.network, value: p.value },
            { existing: [...new Set([...p.files, ...current])], target: from },
          );
          await fsyncFile(from);
          prepared.push(preparedFile(paths, { shape: p.shape, network: p.network, partition: p.value }, from, written));
        }
        return decideAndApply(paths, { snapshot: readAt, tables: replacedTables(lake, prepared) }, () =>
          journalFor(paths, `${id}/${path.basename(workDir)}`, id, prepared, { windows: [], watermarks: [] }),
        );
      },
      { runAgain: `the partitions of ${batch} earlier batches were rebuilt from disk and stay; catalog rebuild run again rebuilds the others from disk` },
    );
    readAt = snapshot ?? readAt;
    // Committed: the files read are no snapshot's now, but for those the catalog names.
    for (const p of chunk) for (const f of p.files) if (!listed.has(f)) await rm(f, { force: true });
    done.partitionsFromDisk += chunk.length;
    done.filesReplaced += chunk.reduce((n, p) => n + p.files.length, 0);
  }
  for (const shape of shapes) await rm(paths.legacyDatasetDir(shape.name), { recursive: true, force: true });
  await Catalog.write(paths, (c) => c.lake.query(`DELETE FROM lake_meta WHERE key = '${FROM_DISK_KEY}'`));
  return done;
}

/** The partitions on disk, of both layouts: one folder of each may hold the same partition, merged together. */
async function diskPartitionsOf(paths: LakePaths, shapes: readonly TableShape[]): Promise<PartitionRef[]> {
  const parts = (await Promise.all(shapes.map((s) => diskPartitions(paths, s)))).flat();
  const merged = new Map<string, PartitionRef>();
  for (const p of parts) {
    const key = `${p.shape.name}\u0000${p.network}\u0000${p.value}`;
    const had = merged.get(key);
    merged.set(key, had ? { ...had, files: [...had.files, ...p.files] } : p);
  }
  return [...merged.values()];
}

/** What `chainlake maintain` keeps and removes, on either kind of lake. */
export interface RetentionOptions {
  /** Expire snapshots older than this (never the newest). */
  expireOlderThan?: Date;
  /** Keep only the newest N snapshots. */
  keepSnapshots?: number;
  /** Files nothing refers to are removed once older than this many seconds (files being written are younger). */
  orphanGraceSeconds: number;
}

/** What `chainlake maintain` did, on either kind of lake. */
export interface MaintainReport {
  runId: string;
  expiredSnapshots: number;
  /** Files no remaining snapshot needs, deleted. */
  deletedFiles: number;
  /** Files nothing refers to (no snapshot lists, no waiting window names), removed once older than the grace period. */
  orphansRemoved: number;
  /** The same, younger than the grace period: kept. */
  orphansKept: number;
}

/**
 * `chainlake maintain` on a single-machine lake, under the lake's lock: expires snapshots (older than
 * `expireOlderThan`, or all but the newest `keepSnapshots`; never the newest), deletes the files no remaining
 * snapshot needs, and removes Parquet files in the tables' folders that no snapshot lists once older than
 * `orphanGraceSeconds` (files copied in, or left by a conversion killed half-way; chainlake's commits leave none).
 */
export async function maintainLocalLake(paths: LakePaths, opts: RetentionOptions): Promise<MaintainReport> {
  return maintain(paths, 'maintain', async (_engine, id) => {
    const { expired, scheduled } = await Catalog.write(paths, async (c) => {
      const e =
        opts.expireOlderThan || opts.keepSnapshots !== undefined
          ? await expireSnapshots(c.lake, { olderThan: opts.expireOlderThan, keepLast: opts.keepSnapshots })
          : { expired: [] };
      return { expired: e.expired.length, scheduled: await filesToDelete(c.lake, { dataPath: c.dataPath }) };
    });
    // Deleted, then forgotten: a kill in between leaves them scheduled, and deleting a missing file is done.
    for (const f of scheduled) await rm(f.path, { force: true });
    const known = await Catalog.write(paths, async (c) => {
      await forgetDeletedFiles(c.lake, scheduled);
      return c.listedFiles();
    });
    let orphansRemoved = 0;
    let orphansKept = 0;
    const cutoff = Date.now() - opts.orphanGraceSeconds * 1000;
    for (const shape of await Catalog.hold(paths, (c) => lakeTableShapes({ db: c.lake }))) {
      for (const p of await diskPartitions(paths, shape)) {
        for (const f of p.files) {
          if (known.has(f)) continue;
          if ((await stat(f)).mtimeMs > cutoff) orphansKept++;
          else {
            await rm(f, { force: true });
            orphansRemoved++;
          }
        }
      }
    }
    await pruneEmptyPartitionDirs(paths, lakeShapes());
    return { runId: id, expiredSnapshots: expired, deletedFiles: scheduled.length, orphansRemoved, orphansKept };
  });
}
