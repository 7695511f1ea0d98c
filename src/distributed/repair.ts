/**
 * `verify --repair` on a distributed lake: the windows that differ from the API, enqueued as a run of their own
 * (enqueue.ts) and worked in this process until idle by the mode's own worker and its one committer (worker.ts,
 * commit.ts, under the committer lease), so their windows and requests land in the control plane's ledger as any
 * run's do; it takes and commits only that run's windows (WorkerOptions.run), never another job's queued or
 * fetched beside them. No commit is due while they are being fetched, and the one commit takes every fetched window
 * of the run: they are committed together, one snapshot, however many differ.
 */
import { dataPathOf } from '../ducklake/reader.js';
import type { Job } from '../pipeline/job.js';
import type { Logger } from '../pipeline/log.js';
import type { Window } from '../pipeline/plan.js';
import type { RunReport } from '../pipeline/report.js';
import { CONTROL_SCHEMA, openCatalog } from './control-plane.js';
import { enqueueJob, type DistributedOptions } from './enqueue.js';
import { storeLocationOf } from './store.js';
import { runWorker } from './worker.js';

/** Windows a repair fetches at once: each holds its own connections. */
const REPAIR_WINDOWS_AT_ONCE = 16;

export interface DistributedRepair {
  runId: string;
  status: RunReport['status'];
  requests: number;
  /** The DuckLake snapshots that committed the repair's windows (one, unless the windows outgrew one commit). */
  snapshots: number[];
}

export async function repairDistributed(
  job: Job,
  doc: unknown,
  windows: readonly Window[],
  opts: Pick<DistributedOptions, 'simulator' | 'transport' | 'storeConnection'> & {
    catalog: string;
    store?: string;
    log?: Logger;
    now?: () => Date;
    env?: NodeJS.ProcessEnv;
    /** The named account the repair's enqueue and worker charge (DEFAULT_ACCOUNT when not given). */
    account?: string;
  },
): Promise<DistributedRepair> {
  const { client, catalog } = await openCatalog(opts.catalog);
  let store: string;
  try {
    // The files as this machine reaches them, as the lake's reader finds them: the store named, else the catalog's.
    store = opts.store ?? storeLocationOf(await dataPathOf(catalog));
  } finally {
    await client.end().catch(() => undefined);
  }
  const enqueued = await enqueueJob(
    job,
    doc,
    { catalog: opts.catalog, store, storeConnection: opts.storeConnection, simulator: opts.simulator, transport: opts.transport, account: opts.account },
    { windows },
  );
  const worked = await runWorker({
    catalog: opts.catalog,
    store,
    storeConnection: opts.storeConnection,
    simulator: opts.simulator,
    transport: opts.transport,
    untilIdle: true,
    ...(opts.account ? { account: opts.account } : {}),
    // Its own run's windows only: another job's windows queued meanwhile are its workers' to fetch and commit.
    run: enqueued.runId,
    // Windows in hand at once up to a bound on this process's connections; a commit only once every window is
    // fetched (not when the slots happen to be empty between two windows), and no bound on its rows or windows: the
    // batch of every fetched window, one snapshot, however many windows differ.
    windowsAtOnce: Math.min(REPAIR_WINDOWS_AT_ONCE, Math.max(1, windows.length)),
    commitWhenDone: true,
    commitRows: Number.MAX_SAFE_INTEGER,
    commitWindows: Number.MAX_SAFE_INTEGER,
    ...(opts.log ? { log: opts.log } : {}),
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.env ? { env: opts.env } : {}),
  });
  // Its enqueue's head lookup counts, as a local repair's run counts its head pin.
  return {
    runId: enqueued.runId,
    status: worked.status,
    requests: worked.requests + enqueued.requests,
    snapshots: await runSnapshots(opts.catalog, enqueued.runId),
  };
}

/** The snapshots that committed a run's windows, oldest first. */
async function runSnapshots(catalogUrl: string, runId: string): Promise<number[]> {
  const ledger = await openCatalog(catalogUrl);
  try {
    const rows = await ledger.client.query(
      `SELECT DISTINCT snapshot_id FROM ${CONTROL_SCHEMA}.windows WHERE run_id = $1 AND snapshot_id IS NOT NULL ORDER BY snapshot_id`,
      [runId],
    );
    return rows.rows.map((r) => Number(r.snapshot_id));
  } finally {
    await ledger.client.end().catch(() => undefined);
  }
}
