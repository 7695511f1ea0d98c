/**
 * `chainlake maintain` for a distributed lake: expire old snapshots, delete the files no remaining snapshot
 * needs, and sweep the store of files nothing refers to (a fragment a worker wrote just before it died, the
 * partition files of a commit that never happened, fragments a committer died before removing). Orphans are
 * removed only once older than a grace period, so files a live worker or committer is writing right now stay.
 */
import { ChainlakeError } from '../errors.js';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { CatalogDb } from '../ducklake/catalog-db.js';
import { byteaColumns, currentSnapshot, dataPathOf, listDataFiles, listInlinedData, listTables, type LakeTable } from '../ducklake/reader.js';
import { expireSnapshots, filesToDelete, forgetDeletedFiles } from '../ducklake/writer.js';
import { openEngine } from '../load/engine.js';
import { newMaintenanceId } from '../load/ids.js';
import { ident } from '../load/sql.js';
import type { TableShape } from '../load/schema.js';
import { lakeShapes } from '../load/write/maintenance.js';
import { silentLogger } from '../pipeline/log.js';
import { commitUnderLease, type LeasedChange } from './commit.js';
import { CONTROL_SCHEMA, openCatalog } from './control-plane.js';
import { openStore, storeLocationOf, type Store, type StoreConnection, type StoredFile } from './store.js';
import { catalogFiles } from '../ducklake/files.js';
import type pg from 'pg';

export interface MaintainOptions {
  catalog: string;
  store: string;
  storeConnection?: StoreConnection;
  /** Expire snapshots older than this (never the newest). */
  expireOlderThan?: Date;
  /** Keep only the newest N snapshots. */
  keepSnapshots?: number;
  /** Files nothing refers to are removed once older than this many seconds. */
  orphanGraceSeconds: number;
}

export interface MaintainReport {
  expiredSnapshots: number;
  deletedFiles: number;
  orphansRemoved: number;
  orphansKept: number;
}

export async function maintainLake(opts: MaintainOptions): Promise<MaintainReport> {
  const store = await openStore(opts.store, opts.storeConnection);
  const { client, catalog } = await openCatalog(opts.catalog).catch(async (e: unknown) => {
    await store.close();
    throw e;
  });
  try {
    let expiredSnapshots = 0;
    if (opts.expireOlderThan || opts.keepSnapshots !== undefined) {
      expiredSnapshots = (await expireSnapshots(catalog, { olderThan: opts.expireOlderThan, keepLast: opts.keepSnapshots })).expired.length;
    }
    const scheduled = await filesToDelete(catalog, { dataPath: store.dataPath });
    for (const f of scheduled) await store.remove(f.path);
    await forgetDeletedFiles(catalog, scheduled);

    const candidates = await unreferencedFiles(client, catalog, store);
    const cutoff = Date.now() - opts.orphanGraceSeconds * 1000;
    let orphansRemoved = 0;
    let orphansKept = 0;
    for (const file of candidates) {
      if (file.modifiedMs > cutoff) {
        orphansKept++;
        continue;
      }
      await store.remove(file.location);
      orphansRemoved++;
    }
    await store.tidy();
    return { expiredSnapshots, deletedFiles: scheduled.length, orphansRemoved, orphansKept };
  } finally {
    await client.end().catch(() => undefined);
    await store.close();
  }
}

/**
 * The files of the store (`lake/` and `fragments/`) that neither the catalog (any snapshot's data and delete files,
 * files scheduled for deletion) nor the control plane (fragments of windows waiting for the committer) names:
 * orphans, once older than a commit takes (a file is written before it is named). What the catalog and the control
 * plane name is read after listing the store: a file written after the listing is not looked at, and one named by
 * then is kept.
 */
export async function unreferencedFiles(
  client: Pick<pg.Client, 'query'>,
  catalog: CatalogDb,
  store: Store,
): Promise<(StoredFile & { area: 'lake' | 'fragments' })[]> {
  const candidates = [
    ...(await store.list('lake')).map((f) => ({ ...f, area: 'lake' as const })),
    ...(await store.list('fragments')).map((f) => ({ ...f, area: 'fragments' as const })),
  ];
  const referenced = new Set<string>();
  const fragments = await client.query(
    `SELECT fragment_path AS p FROM ${CONTROL_SCHEMA}.windows WHERE status = 'fetched' AND fragment_path IS NOT NULL
     UNION ALL SELECT reject_path FROM ${CONTROL_SCHEMA}.windows WHERE status = 'fetched' AND reject_path IS NOT NULL`,
  );
  for (const r of fragments.rows) referenced.add(norm(String(r.p)));
  for (const f of await catalogFiles(catalog, store.dataPath)) referenced.add(norm(f.location));
  return candidates.filter((f) => !referenced.has(norm(f.location)));
}

export interface DistributedCompactReport {
  runId: string;
  /** The one snapshot the compaction wrote; null when every partition was already compact (nothing written). */
  snapshotId: number | null;
  partitions: number;
  filesBefore: number;
  filesAfter: number;
  /** Partitions left as they were: one data file, no deletes, no rows inlined into the catalog. */
  alreadyCompact: number;
}

/** Long enough for a large lake's merge; renewed by nothing, so it bounds how long a crashed compaction holds it. */
const COMPACT_LEASE_SECONDS = 600;

/**
 * `chainlake compact --catalog`: each partition of several data files, or with deletes or rows another DuckLake writer
 * inlined into the catalog, is merged by the distributed committer's merge (one row per key, one file) and all are
 * committed as ONE snapshot under the committer lease, so it never races a worker's commit. A partition that is
 * already one file with nothing deleted or inlined is left alone (the local compact's rule): a compact lake gets no
 * snapshot at all. The files replaced stay for older snapshots until `maintain --catalog` expires them.
 */
export async function compactDistributedLake(opts: {
  catalog: string;
  store?: string;
  storeConnection?: StoreConnection;
  datasets?: readonly string[];
}): Promise<DistributedCompactReport> {
  const runId = newMaintenanceId('compact');
  const { client, catalog } = await openCatalog(opts.catalog);
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'chainlake-compact-'));
  try {
    const store = await openStore(opts.store ?? storeLocationOf(await dataPathOf(catalog)), opts.storeConnection);
    try {
      const report: DistributedCompactReport = { runId, snapshotId: null, partitions: 0, filesBefore: 0, filesAfter: 0, alreadyCompact: 0 };
      const snapshot = (await currentSnapshot(catalog)).snapshotId;
      const tables = new Map((await listTables(catalog, snapshot)).filter((t) => t.schema.name === 'main').map((t) => [t.name, t]));
      const changes: LeasedChange[] = [];
      for (const shape of lakeShapes()) {
        const table = tables.get(shape.name);
        if (!table || (opts.datasets && !opts.datasets.includes(shape.name))) continue;
        const parts = await partitionsOf(catalog, table, shape, snapshot, store.localDataPath);
        const rewrite = new Map<string, string[]>();
        for (const [key, p] of parts) {
          if (p.files === 1 && !p.changed) {
            report.alreadyCompact++;
            continue;
          }
          const [network, value] = key.split('\u0000') as [string, string];
          rewrite.set(network, [...(rewrite.get(network) ?? []), value]);
          report.partitions++;
          report.filesBefore += p.files;
        }
        if (rewrite.size > 0) changes.push({ shape, fragments: new Map(), rewrite });
      }
      if (changes.length === 0) return report;
      const engine = await openEngine({ tempDir: path.join(scratch, 'duckdb-tmp') });
      try {
        const deps = { catalog, engine, store, holder: runId, leaseSeconds: COMPACT_LEASE_SECONDS, log: silentLogger };
        const committed = await commitUnderLease(deps, client, changes, `chainlake compact ${runId}`);
        return { ...report, snapshotId: committed.snapshotId, filesAfter: committed.files };
      } finally {
        engine.close();
      }
    } finally {
      await store.close();
    }
  } finally {
    await client.end().catch(() => undefined);
    await rm(scratch, { recursive: true, force: true });
  }
}

/**
 * A table's partitions (network, partition value) at `snapshot`: how many data files each has, and whether anything
 * else shapes its rows (a delete file, inlined deletes, rows inlined into the catalog).
 */
async function partitionsOf(
  catalog: CatalogDb,
  table: LakeTable,
  shape: TableShape,
  snapshot: number,
  dataPath: string,
): Promise<Map<string, { files: number; changed: boolean }>> {
  const out = new Map<string, { files: number; changed: boolean }>();
  const deleted = new Set(
    (await listDataFiles(catalog, table, snapshot, dataPath)).filter((f) => f.deleteFile || f.inlinedDeletes.length > 0).map((f) => f.dataFileId),
  );
  const rows = await catalog.query(
    `SELECT d.data_file_id, n.partition_value AS network, p.partition_value AS value FROM ducklake_data_file d
     JOIN ducklake_file_partition_value n ON n.data_file_id = d.data_file_id AND n.partition_key_index = 0
     JOIN ducklake_file_partition_value p ON p.data_file_id = d.data_file_id AND p.partition_key_index = 1
     WHERE d.table_id = $1 AND d.begin_snapshot <= $2 AND (d.end_snapshot IS NULL OR $2 < d.end_snapshot)`,
    [table.tableId, snapshot],
  );
  for (const r of rows) {
    const key = `${String(r.network)}\u0000${String(r.value)}`;
    const had = out.get(key) ?? { files: 0, changed: false };
    out.set(key, { files: had.files + 1, changed: had.changed || deleted.has(Number(r.data_file_id)) });
  }
  for (const t of await listInlinedData(catalog, table)) {
    if (!t.columns.includes('network') || !t.columns.includes(shape.partition)) continue;
    // The reference extension keeps VARCHAR columns as bytea in PostgreSQL, whose text form is hex.
    const bytea = await byteaColumns(catalog, t.name);
    const text = (c: string, v: unknown): string =>
      bytea.has(c) && typeof v === 'string' && v.startsWith('\\x') ? Buffer.from(v.slice(2), 'hex').toString('utf8') : String(v);
    const inlined = await catalog.query(
      `SELECT DISTINCT CAST(network AS VARCHAR) AS network, CAST(${ident(shape.partition)} AS VARCHAR) AS value FROM ${ident(t.name)}
       WHERE begin_snapshot <= $1 AND (end_snapshot IS NULL OR $1 < end_snapshot)`,
      [snapshot],
    );
    for (const r of inlined) {
      const key = `${text('network', r.network)}\u0000${text(shape.partition, r.value)}`;
      out.set(key, { files: out.get(key)?.files ?? 0, changed: true });
    }
  }
  return out;
}

/** One spelling per file: object locations as they are, local paths resolved. */
export const norm = (location: string): string => (/^s3:\/\//i.test(location) ? location : path.resolve(location));

/** `7d`, `12h`, `30m`, `45s` or plain seconds: a duration in seconds. */
export function parseDuration(text: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(d|h|m|s)?$/.exec(text.trim());
  if (!m) throw new ChainlakeError(`${flag} ${text}: expected a duration such as 7d, 12h, 30m, 45s or seconds`, { code: 'CHAINLAKE_USAGE' });
  const unit = { d: 86_400, h: 3_600, m: 60, s: 1 }[(m[2] ?? 's') as 'd' | 'h' | 'm' | 's'];
  return Number(m[1]) * unit;
}
