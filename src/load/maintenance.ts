import { readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Network } from '../datasets/dataset.js';
import { DATASETS } from '../datasets/registry.js';
import { Catalog, TABLES } from './catalog.js';
import { journalFor } from './commit-run.js';
import { partitionParquetFiles, preparePartition, type CommittedFile, type PreparedFile } from './commit.js';
import { mkdirDurable } from './durable.js';
import { openEngine, type Engine } from './engine.js';
import { applyJournal, publishJournal } from './journal.js';
import { LakeLock } from './lock.js';
import { PARTITION_FILE, type LakePaths } from './paths.js';
import { recoverLake, type RecoveryReport } from './recovery.js';
import { REJECTS_SHAPE, datasetShape, type TableShape } from './schema.js';
import { literal, literalList } from './sql.js';
import { openRunStaging, closeRunStaging } from './staging.js';
import { newMaintenanceId } from './ids.js';
import { catalogProblem, salvageCatalog, type SalvageReport } from './salvage.js';

/** Every table the lake can hold: the registry's datasets and the rejects log. */
export function lakeShapes(): TableShape[] {
  return [...Object.values(DATASETS).map(datasetShape), REJECTS_SHAPE];
}

export interface PartitionRef {
  shape: TableShape;
  network: Network;
  value: string;
  dir: string;
  files: string[];
}

/** The partitions of a table as they sit on disk (folders that hold at least one Parquet file). */
export async function listPartitions(paths: LakePaths, shape: TableShape): Promise<PartitionRef[]> {
  const out: PartitionRef[] = [];
  const root = paths.datasetDir(shape.name);
  for (const net of (await readdir(root).catch(() => [] as string[])).sort()) {
    if (!net.startsWith('network=')) continue;
    const prefix = `${shape.partition}=`;
    for (const part of (await readdir(path.join(root, net)).catch(() => [] as string[])).sort()) {
      if (!part.startsWith(prefix)) continue;
      const dir = path.join(root, net, part);
      const files = await partitionParquetFiles(dir);
      if (files.length) out.push({ shape, network: net.slice('network='.length) as Network, value: part.slice(prefix.length), dir, files });
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

export interface CompactReport {
  runId: string;
  partitions: number;
  filesBefore: number;
  filesAfter: number;
  rowsBefore: number;
  rowsAfter: number;
  bytesBefore: number;
  bytesAfter: number;
  /** Empty partition folders removed. */
  prunedDirs: number;
}

/** Partitions rewritten per commit: bounds the staging disk a compaction needs at once. */
const COMPACT_BATCH = 64;

/**
 * Rewrites partitions into their canonical form: one `data.parquet` per partition, every stray file folded
 * in, one row per natural key, the declared columns and types, sorted, ZSTD. Commits in batches through the
 * same journaled protocol as a run, so it is atomic for catalog readers and crash-safe; the rows a reader
 * sees do not change, except duplicates that disappear.
 */
export async function compactLake(paths: LakePaths, opts: { datasets?: string[] } = {}): Promise<CompactReport> {
  return maintain(paths, 'compact', async (engine, id, staging) => {
    const shapes = lakeShapes().filter((s) => !opts.datasets || opts.datasets.includes(s.name));
    const report: CompactReport = {
      runId: id,
      partitions: 0,
      filesBefore: 0,
      filesAfter: 0,
      rowsBefore: 0,
      rowsAfter: 0,
      bytesBefore: 0,
      bytesAfter: 0,
      prunedDirs: 0,
    };
    const startedAt = new Date().toISOString();
    const parts = (await Promise.all(shapes.map((s) => listPartitions(paths, s)))).flat();
    let batch = 0;
    for (let i = 0; i < parts.length; i += COMPACT_BATCH) {
      const chunk = parts.slice(i, i + COMPACT_BATCH);
      const workDir = path.join(staging, `batch-${batch}`);
      await mkdirDurable(workDir);
      const prepared: PreparedFile[] = [];
      for (const p of chunk) {
        report.filesBefore += p.files.length;
        report.rowsBefore += Number(
          (await engine.conn.runAndReadAll(`SELECT count(*)::BIGINT FROM read_parquet(${literalList(p.files)}, union_by_name = true)`)).getRowsJS()[0]![0],
        );
        for (const f of p.files) report.bytesBefore += (await stat(f)).size;
        const prep = await preparePartition(engine, paths, p.shape, p.network, p.value, undefined, workDir);
        prepared.push(prep);
        report.partitions++;
        report.filesAfter++;
        report.rowsAfter += prep.file.rows;
        report.bytesAfter += prep.file.bytes;
      }
      const last = i + COMPACT_BATCH >= parts.length;
      const run = last ? { runId: id, job: '(compact)', startedAt, finishedAt: new Date().toISOString(), status: 'compact', report } : undefined;
      const journal = journalFor(paths, `${id}/${path.basename(workDir)}`, id, prepared, { run, windows: [], watermarks: [] });
      await publishJournal(paths, journal);
      await applyJournal(engine, paths, journal);
      batch++;
    }
    if (parts.length === 0) await Catalog.write(engine, paths, (c) => c.refreshViews());
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
  files: number;
  filesAdded: number;
  filesForgotten: number;
  /** Set when the catalog was missing or damaged: what was carried over and what was lost. */
  salvage?: SalvageReport;
}

/**
 * Rebuilds what the catalog derives from the files: every view (with comments, at the lake's current
 * absolute path) and the `files` table (rows, bytes and block range read back from each file). Runs,
 * windows and watermarks are history and are kept. This is what makes a moved or copied lake, or one whose
 * catalog was lost, queryable again; every chainlake command does the view part by itself when needed.
 */
export async function rebuildCatalog(paths: LakePaths): Promise<RebuildReport> {
  let salvage: SalvageReport | undefined;
  const first = async (): Promise<void> => {
    const problem = await catalogProblem(paths);
    if (problem) salvage = await salvageCatalog(paths, problem, TABLES);
  };
  const report = await maintain(
    paths,
    'catalog-rebuild',
    async (engine, id, _staging, recovery) => {
      const onDisk: CommittedFile[] = [];
      for (const shape of lakeShapes()) {
        for (const p of await listPartitions(paths, shape)) {
          for (const f of p.files) {
            const block = shape.blockColumn;
            const hasBlock =
              block &&
              (
                await engine.conn.runAndReadAll(
                  `SELECT count(*) FROM (DESCRIBE SELECT * FROM read_parquet(${literal(f)})) WHERE column_name = ${literal(block)}`,
                )
              ).getRowsJS()[0]![0];
            const [n, lo, hi] = (
              await engine.conn.runAndReadAll(
                `SELECT count(*)::BIGINT${hasBlock ? `, min("${block}")::BIGINT, max("${block}")::BIGINT` : ''} FROM read_parquet(${literal(f)})`,
              )
            ).getRowsJS()[0] as [bigint, bigint | null | undefined, bigint | null | undefined];
            onDisk.push({
              dataset: shape.name,
              network: p.network,
              partition: p.value,
              path: paths.relative(f),
              rows: Number(n),
              bytes: (await stat(f)).size,
              minBlock: lo == null ? null : lo.toString(),
              maxBlock: hi == null ? null : hi.toString(),
            });
          }
        }
      }
      return Catalog.write(engine, paths, async (c) => {
        const known = await c.filePaths();
        const present = new Set(onDisk.map((f) => f.path));
        const gone = known.filter((p) => !present.has(p));
        await c.forgetFiles(gone);
        await c.recordFiles(id, onDisk);
        await c.refreshViews({ force: true });
        return { runId: id, recovery, files: onDisk.length, filesAdded: onDisk.filter((f) => !known.includes(f.path)).length, filesForgotten: gone.length };
      });
    },
    first,
  );
  return { ...report, salvage };
}

export { PARTITION_FILE };
