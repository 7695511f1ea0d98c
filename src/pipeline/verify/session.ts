/**
 * One `chainlake verify` on either kind of lake: read (the lake reader a query uses), check (verify.ts), record
 * the findings and the requests in the lake's ledger, and with `repair` fetch the differing windows again through
 * the run's own pipeline and committer.
 */
import { Catalog } from '../../load/catalog.js';
import { recordVerifications } from '../../load/ledger/verifications.js';
import { LakePaths } from '../../load/paths.js';
import { openLakeTables, type LakeTarget } from '../../lake/open.js';
import { ChainlakeError } from '../../errors.js';
import type { Job } from '../job.js';
import type { RunReport } from '../report.js';
import { runJob, type RunOptions } from '../run.js';
import { DEFAULT_ACCOUNT } from '../../distributed/plan-ledger.js';
import { planVerify, verifyAccount, verifyLake, type VerifyPlan, type VerifyResult, type VerifySelection } from './verify.js';

/** The lake verified: either kind, opened by the one opener (lake/open.ts). */
export type VerifyTarget = LakeTarget;

export interface VerifyOptions extends Pick<RunOptions, 'simulator' | 'transport' | 'logger'> {
  now?: () => Date;
  /** Fetch the windows whose count differs again and commit them (one snapshot). */
  repair?: boolean;
  /** The job's document as written: a distributed repair enqueues it with its windows (the workers read the job from it). */
  doc?: unknown;
  /** The environment a distributed repair's worker reads the base URLs and API key from (the stored job has no key). */
  env?: NodeJS.ProcessEnv;
  /**
   * A distributed lake: the named API account whose key verify sends (as `worker --account`): its requests count
   * against that account's daily quota, and a repair's enqueue and worker use it. Default `default`. A local lake's
   * account is the explorer's base URL, as its runs'.
   */
  account?: string;
}

/** What a repair did, either kind of lake: its run, how it ended, the requests it spent. */
export interface RepairReport {
  runId: string;
  status: RunReport['status'];
  requests: number;
  /** A distributed lake: the DuckLake snapshots that committed the repair (one). */
  snapshots?: number[];
}

/** What `verify --plan` prints: the requests a verify would send, without sending any. */
export async function planVerifySession(job: Job, target: VerifyTarget, sel: VerifySelection): Promise<VerifyPlan> {
  const reader = await openLakeTables(target);
  try {
    return await planVerify(reader.conn, job, sel);
  } finally {
    reader.close();
  }
}

export interface VerifySession extends VerifyResult {
  /** With `repair`: the run that fetched the differing windows again. */
  repair?: RepairReport;
  /**
   * With `repair`, when something was repaired: the verify before the repair (this session's own fields are the
   * verify after it, of the same selection, so that `holds` says whether the repair made the lake hold).
   */
  beforeRepair?: VerifyResult;
}

export async function verifySession(job: Job, target: VerifyTarget, sel: VerifySelection, opts: VerifyOptions = {}): Promise<VerifySession> {
  const now = opts.now ?? (() => new Date());
  if (opts.repair && target.kind === 'distributed' && opts.doc === undefined)
    throw new ChainlakeError('verify --repair of a distributed lake needs the job document: its workers read the job from it', {
      code: 'CHAINLAKE_USAGE',
      hint: 'pass the job document as `doc` (the CLI does)',
    });
  const account = target.kind === 'distributed' ? (opts.account ?? DEFAULT_ACCOUNT) : verifyAccount(job);
  const verify = async (): Promise<VerifyResult> => {
    const reader = await openLakeTables(target);
    let result: VerifyResult;
    try {
      result = await verifyLake(job, sel, { conn: reader.conn, run: { simulator: opts.simulator, transport: opts.transport }, now, account });
    } finally {
      reader.close();
    }
    await recordSession(target, account, result, now());
    return result;
  };
  const before = await verify();
  if (!opts.repair || before.differing.length === 0) return before;
  const repair = await repairWindows(job, target, before.differing, opts);
  // Verified again, the same selection: a repair is not taken on its word (one request per scope while it holds).
  const after = await verify();
  return { ...after, repair, beforeRepair: before };
}

/**
 * The differing windows fetched again and committed once, by each mode's own machinery: on one machine the
 * run's pipeline and committer (everything one commit); distributed, a run of their own worked by this process
 * as a worker (distributed/repair.ts). Only where the repair writes differs.
 */
async function repairWindows(job: Job, target: VerifyTarget, found: VerifyResult['differing'], opts: VerifyOptions): Promise<RepairReport> {
  // A window fetched again replaces its rows, as finality's re-fetch of a provisional one does (load/write/replace.ts):
  // rows of its scope and range that the API no longer lists go in the same snapshot. A merge by key would keep them.
  const differing = found.map((w) => ({ ...w, replaces: true }));
  if (target.kind === 'distributed') {
    const { repairDistributed } = await import('../../distributed/repair.js');
    return repairDistributed(job, opts.doc, differing, {
      catalog: target.catalog,
      store: target.store,
      storeConnection: target.storeConnection,
      simulator: opts.simulator,
      transport: opts.transport,
      log: opts.logger,
      now: opts.now,
      env: opts.env,
      ...(opts.account ? { account: opts.account } : {}),
    });
  }
  const repairJob: Job = Object.freeze({
    ...job,
    lake: Object.freeze({
      ...job.lake,
      dir: target.lake,
      commit: Object.freeze({ everyRows: Number.MAX_SAFE_INTEGER, everySeconds: Number.MAX_SAFE_INTEGER }),
    }),
  });
  const run = await runJob(repairJob, { simulator: opts.simulator, transport: opts.transport, logger: opts.logger, windows: differing, now: opts.now });
  return { runId: run.runId, status: run.status, requests: run.totals.requests };
}

/** The findings into `verifications`, the requests into `request_usage`: the lake's own ledger, either kind. */
async function recordSession(target: VerifyTarget, account: string, result: VerifyResult, at: Date): Promise<void> {
  const day = at.toISOString().slice(0, 10);
  if (target.kind === 'local') {
    await Catalog.hold(new LakePaths(target.lake), (c) =>
      c.transaction(async () => {
        if (result.requests > 0) await c.recordReservedUsage(result.verifyId, { account, days: { [day]: result.requests } });
        await recordVerifications(c.lake, '', result.verifyId, at, result.rows);
      }),
    );
    return;
  }
  const [{ connect, CONTROL_SCHEMA }, { PostgresCatalog }] = await Promise.all([
    import('../../distributed/control-plane.js'),
    import('../../ducklake/postgres-catalog.js'),
  ]);
  const client = await connect(target.catalog);
  try {
    const db = new PostgresCatalog(client);
    if (result.requests > 0)
      await db.query(
        `INSERT INTO ${CONTROL_SCHEMA}.request_usage (account, day, requests) VALUES ($1, $2, $3)
         ON CONFLICT (day, account, run_id) DO UPDATE SET requests = ${CONTROL_SCHEMA}.request_usage.requests + EXCLUDED.requests`,
        [account, day, result.requests],
      );
    await recordVerifications(db, CONTROL_SCHEMA, result.verifyId, at, result.rows);
  } finally {
    await client.end().catch(() => undefined);
  }
}
