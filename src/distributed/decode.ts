/**
 * `chainlake decode --catalog`: decodes every event_logs row a distributed lake holds (of one network) into the
 * decoded datasets and their rejects into `_rejects`, as ONE snapshot under the committer lease, so it never races
 * a worker's commit. What is decoded and which earlier rejects it replaces is the single machine's code
 * (decodeLakeLogs, decode/lake.ts); only where the logs are read and how the rows are committed is this lake's: the
 * lake's current rows read under the lease, and the committer's merge (one row per natural key, so decoding again
 * replaces instead of adding).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Network } from '../datasets/dataset.js';
import type { DecodedDataset } from '../decode/datasets.js';
import { distinctDatasets } from '../decode/decode.js';
import { declaredTables, decodedShape, decodeLakeLogs, decodeRun, lakeLogs, type DecodedLogs, type DecodeReport } from '../decode/lake.js';
import { findReplacedRejects, KEEP_REJECT } from '../decode/rejects.js';
import { dataPathOf } from '../ducklake/reader.js';
import { getDataset } from '../datasets/registry.js';
import { openEngine } from '../load/engine.js';
import { newMaintenanceId } from '../load/ids.js';
import { datasetShape, REJECTS_SHAPE, STAGED_PARTITION, type TableShape } from '../load/schema.js';
import type { CatalogDb } from '../ducklake/catalog-db.js';
import { ident, literal } from '../load/sql.js';
import { ensureTable } from '../load/write/lake-tables.js';
import { droppedTables } from '../load/write/dropped-tables.js';
import { silentLogger } from '../pipeline/log.js';
import { underLease } from './lease.js';
import { commitLeased, type CommitDeps, type LeasedChange, type LeasedCommit } from './commit.js';
import { readLake } from './lake-rows.js';
import { connect, CONTROL_SCHEMA, oneAtATime, openCatalog } from './control-plane.js';
import { declareTables } from '../load/ledger/declared-tables.js';
import { recordRun } from '../load/ledger/runs.js';
import { openStore, storeLocationOf, type StoreConnection } from './store.js';
import { commitMessage } from '../load/catalog.js';

/**
 * The decoded tables and the decoding's rejects as ONE snapshot by the committer's merge (under the lease the caller
 * holds), `record` in its transaction. The rejects join the decoding's day; the days holding rejects they replace
 * are rewritten without those.
 */
async function commitDecoded(
  deps: CommitDeps,
  shapes: readonly TableShape[],
  decoded: DecodedLogs,
  at: { network: Network; ingestedAt: string; message: string },
  record: (tx: CatalogDb, committed: LeasedCommit) => Promise<void>,
): Promise<LeasedCommit> {
  const { network } = at;
  const conn = deps.engine.conn;
  const fresh = new Map(decoded.datasets.map((d) => [d.shape.name, d.table] as const));
  // The merge reads fresh rows on connections of its own: the rejects go to a plain table.
  const rejectsTable = ident('__chainlake_decode_rejects');
  if (decoded.rejects) await conn.run(`CREATE OR REPLACE TABLE ${rejectsTable} AS ${decoded.rejects}`);
  try {
    const changes: LeasedChange[] = shapes.map((shape) => {
      if (shape !== REJECTS_SHAPE) {
        const table = fresh.get(shape.name);
        // Decoded rows whose log the lake no longer holds go (DecodedLogs.orphans), in their days and the fresh ones.
        const orphanDays = decoded.orphans?.days.get(shape.name);
        return {
          shape,
          fragments: new Map(),
          ...(table ? { fresh: new Map([[network, `SELECT * FROM ${table}`]]) } : {}),
          ...(orphanDays ? { rewrite: new Map([[network, orphanDays]]) } : {}),
          ...(decoded.orphans ? { keep: decoded.orphans.keep } : {}),
        };
      }
      return {
        shape,
        fragments: new Map(),
        ...(decoded.rejects
          ? { fresh: new Map([[network, `SELECT *, ${literal(at.ingestedAt.slice(0, 10))} AS ${ident(STAGED_PARTITION)} FROM ${rejectsTable}`]]) }
          : {}),
        ...(decoded.replacedRejectDays.length ? { rewrite: new Map([[network, decoded.replacedRejectDays]]), keep: KEEP_REJECT } : {}),
      };
    });
    return await commitLeased(deps, changes, at.message, { record });
  } finally {
    await conn.run(`DROP TABLE IF EXISTS ${rejectsTable}`);
  }
}

/** What `chainlake decode --catalog` decodes, and where. */
export interface DistributedDecodeOptions {
  catalog: string;
  store?: string;
  storeConnection?: StoreConnection;
  network: Network;
  datasets: readonly DecodedDataset[];
  /** Seconds the committer lease lasts between renewals (default DECODE_LEASE_SECONDS). */
  leaseSeconds?: number;
  /** Test seam: runs under the lease once the lake's rows are read, before they are decoded. */
  afterRead?: () => Promise<void>;
}

/** Renewed while the decoding runs (underLease), so it bounds only how long a crashed decoding holds the lake's commits up. */
const DECODE_LEASE_SECONDS = 60;

/**
 * The decoding itself, under the committer lease the caller holds: the lake's logs and rejects read, decoded by
 * decodeLakeLogs, and committed with the run's record as one snapshot.
 */
async function decodeUnderLease(ctx: {
  deps: CommitDeps;
  opts: DistributedDecodeOptions;
  run: { runId: string; startedAt: string; network: Network };
  shapes: readonly TableShape[];
  workDir: string;
}): Promise<DecodeReport> {
  const { deps, opts, run, shapes } = ctx;
  const { network, datasets } = opts;
  const { runId, startedAt: ingestedAt } = run;
  const conn = deps.engine.conn;
  // The decoded datasets' tables and `_rejects` exist before their rows are read (empty ones too, as on one machine).
  // Every log is decoded: a decoded table another DuckLake writer dropped is created again and filled whole.
  for (const shape of shapes)
    await ensureTable(deps.catalog, shape, { voided: droppedTables({ db: deps.catalog, schema: CONTROL_SCHEMA }, { decoding: true }) });
  // Read under the lease: no worker commits logs or rejects between this reading and the decoding's commit.
  const lake = await readLake(deps, conn, path.join(ctx.workDir, 'lake'), [datasetShape(getDataset('event_logs')), ...shapes]);
  const logs = await lakeLogs(lake, network);
  await opts.afterRead?.();
  return decodeLakeLogs(
    { conn, datasets, runId, ingestedAt, workDir: ctx.workDir },
    {
      logs,
      replacedRejects: (c, of) => findReplacedRejects(c, lake, network, datasets, of),
      current: async (shape) => lake.partitionsOf(shape, network),
      commit: async (decoded, report) => {
        // The run is recorded in the snapshot's transaction: a decoding recorded complete is committed.
        const committed = await commitDecoded(deps, shapes, decoded, { network, ingestedAt, message: commitMessage([runId], 'decode') }, async (tx, c) => {
          const ledger = { db: tx, schema: CONTROL_SCHEMA };
          await declareTables(ledger, declaredTables(datasets));
          await recordRun(ledger, decodeRun(run, { report: { ...report, files: c.files }, snapshot: c.snapshotId }));
        });
        return committed.files;
      },
    },
  );
}

export async function decodeDistributedLake(opts: DistributedDecodeOptions): Promise<DecodeReport & { runId: string }> {
  const { network, datasets } = opts;
  const runId = newMaintenanceId('decode');
  const ingestedAt = new Date().toISOString();
  const run = { runId, startedAt: ingestedAt, network };
  const { client, catalog } = await openCatalog(opts.catalog);
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'chainlake-decode-'));
  // The lease on a connection of its own (as a worker's): its renewals run beside the catalog's transactions.
  let leases: Awaited<ReturnType<typeof connect>> | undefined;
  try {
    leases = await connect(opts.catalog);
    const store = await openStore(opts.store ?? storeLocationOf(await dataPathOf(catalog)), opts.storeConnection);
    try {
      const engine = await openEngine({ tempDir: path.join(scratch, 'duckdb-tmp') });
      try {
        const deps: CommitDeps = { catalog, engine, store, holder: runId, leaseSeconds: opts.leaseSeconds ?? DECODE_LEASE_SECONDS, log: silentLogger };
        const shapes = [...distinctDatasets(datasets).map(decodedShape), REJECTS_SHAPE];
        const report = await underLease(deps, oneAtATime(leases), `chainlake decode ${runId}`, () =>
          decodeUnderLease({ deps, opts, run, shapes, workDir: path.join(scratch, 'decode') }),
        );
        return { runId, ...report };
      } finally {
        engine.close();
      }
    } finally {
      await store.close();
    }
  } catch (error) {
    await recordRun({ db: catalog, schema: CONTROL_SCHEMA }, decodeRun(run, { error: (error as Error).message })).catch(() => undefined);
    throw error;
  } finally {
    await leases?.end().catch(() => undefined);
    await client.end().catch(() => undefined);
    await rm(scratch, { recursive: true, force: true });
  }
}
