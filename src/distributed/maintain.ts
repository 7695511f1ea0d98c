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
import { dataPathOf } from '../ducklake/reader.js';
import { expireSnapshots, filesToDelete, forgetDeletedFiles } from '../ducklake/writer.js';
import { openEngine } from '../load/engine.js';
import { newMaintenanceId } from '../load/ids.js';
import { recordRun } from '../load/ledger/runs.js';
import type { TableShape } from '../load/schema.js';
import { compactedShapes, compactionTargets, compactRun, countBefore, emptyCompactReport, type CompactReport } from '../load/write/compaction.js';
import { lakeTableShapes } from '../load/ledger/declared-tables.js';
import type { MaintainReport, RetentionOptions } from '../load/write/maintenance.js';
import { silentLogger } from '../pipeline/log.js';
import { underLease } from './lease.js';
import { commitLeased, type CommitDeps, type LeasedChange, type LeasedCommit } from './commit.js';
import { readLake } from './lake-rows.js';
import { CONTROL_SCHEMA, openCatalog } from './control-plane.js';
import { openStore, storeLocationOf, type Store, type StoreConnection, type StoredFile } from './store.js';
import { catalogFiles } from '../ducklake/files.js';
import type pg from 'pg';

export interface MaintainOptions extends RetentionOptions {
  catalog: string;
  store: string;
  storeConnection?: StoreConnection;
}

export async function maintainLake(opts: MaintainOptions): Promise<MaintainReport> {
  const runId = newMaintenanceId('maintain');
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
    return { runId, expiredSnapshots, deletedFiles: scheduled.length, orphansRemoved, orphansKept };
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

/** Long enough for a large lake's merge; renewed while the compaction runs (underLease). */
const COMPACT_LEASE_SECONDS = 600;

/**
 * `chainlake compact --catalog`: the partitions that are not compact (compactionTargets, the single machine's rule)
 * merged by the committer's merge (one row per key, one file) and committed as ONE snapshot with the compaction's
 * run row, under the committer lease, so it never races a worker's commit; the lake is read under the lease too. A
 * compact lake gets no snapshot at all. The files replaced stay for older snapshots until `maintain --catalog`
 * expires them.
 */
export async function compactDistributedLake(opts: {
  catalog: string;
  store?: string;
  storeConnection?: StoreConnection;
  datasets?: readonly string[];
}): Promise<CompactReport> {
  const runId = newMaintenanceId('compact');
  const startedAt = new Date().toISOString();
  const { client, catalog } = await openCatalog(opts.catalog);
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'chainlake-compact-'));
  try {
    const store = await openStore(opts.store ?? storeLocationOf(await dataPathOf(catalog)), opts.storeConnection);
    try {
      const engine = await openEngine({ tempDir: path.join(scratch, 'duckdb-tmp') });
      try {
        const deps = { catalog, engine, store, holder: runId, leaseSeconds: COMPACT_LEASE_SECONDS, log: silentLogger };
        const shapes = compactedShapes(await lakeTableShapes({ db: catalog, schema: CONTROL_SCHEMA }), opts.datasets);
        return await underLease(deps, client, `chainlake compact ${runId}`, () => compactLeased(deps, shapes, startedAt, path.join(scratch, 'lake')));
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
 * The compaction itself, by the holder of the committer lease (deps.holder is the compaction's run id); the partitions
 * another writer changed are written out under `workDir` to be counted.
 */
async function compactLeased(deps: CommitDeps, shapes: readonly TableShape[], startedAt: string, workDir: string): Promise<CompactReport> {
  const report = emptyCompactReport(deps.holder);
  const { targets, alreadyCompact } = compactionTargets(await readLake(deps, deps.engine.conn, workDir, shapes), shapes);
  report.alreadyCompact = alreadyCompact;
  if (targets.length === 0) return report;
  countBefore(report, targets);
  const rewrite = new Map<TableShape, Map<string, string[]>>();
  for (const t of targets) {
    const networks = rewrite.get(t.shape) ?? new Map<string, string[]>();
    rewrite.set(t.shape, networks.set(t.network, [...(networks.get(t.network) ?? []), t.value]));
  }
  const changes: LeasedChange[] = [...rewrite].map(([shape, networks]) => ({ shape, fragments: new Map(), rewrite: networks }));
  const after = (c: LeasedCommit): CompactReport => ({ ...report, snapshotId: c.snapshotId, filesAfter: c.files, rowsAfter: c.rows, bytesAfter: c.bytes });
  const committed = await commitLeased(deps, changes, `${deps.holder}/compact`, {
    record: (tx, c) => recordRun({ db: tx, schema: CONTROL_SCHEMA }, compactRun(after(c), startedAt)),
  });
  return after(committed);
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
