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
import { planVerify, verifyAccount, verifyLake, type VerifyPlan, type VerifyResult, type VerifySelection } from './verify.js';

/** The lake verified: either kind, opened by the one opener (lake/open.ts). */
export type VerifyTarget = LakeTarget;

export interface VerifyOptions extends Pick<RunOptions, 'simulator' | 'transport' | 'logger'> {
  now?: () => Date;
  /** Fetch the windows whose count differs again and commit them (one snapshot). */
  repair?: boolean;
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
  repair?: RunReport;
  /**
   * With `repair`, when something was repaired: the verify before the repair (this session's own fields are the
   * verify after it, of the same selection, so that `holds` says whether the repair made the lake hold).
   */
  beforeRepair?: VerifyResult;
}

export async function verifySession(job: Job, target: VerifyTarget, sel: VerifySelection, opts: VerifyOptions = {}): Promise<VerifySession> {
  const now = opts.now ?? (() => new Date());
  if (opts.repair && target.kind === 'distributed')
    throw new ChainlakeError('verify --repair works on a local lake only for now', {
      code: 'CHAINLAKE_USAGE',
      hint: 'verify the distributed lake without --repair, then enqueue the differing windows again: chainlake enqueue <job> --from-block F --to-block T',
    });
  const verify = async (): Promise<VerifyResult> => {
    const reader = await openLakeTables(target);
    let result: VerifyResult;
    try {
      result = await verifyLake(job, sel, { conn: reader.conn, run: { simulator: opts.simulator, transport: opts.transport }, now });
    } finally {
      reader.close();
    }
    await recordSession(job, target, result, now());
    return result;
  };
  const before = await verify();
  if (!opts.repair || before.differing.length === 0) return before;
  // The same pipeline and committer as `run`, on exactly these windows, committed once (one snapshot).
  const repairJob: Job = Object.freeze({
    ...job,
    lake: Object.freeze({
      ...job.lake,
      dir: (target as { lake: string }).lake,
      commit: Object.freeze({ everyRows: Number.MAX_SAFE_INTEGER, everySeconds: Number.MAX_SAFE_INTEGER }),
    }),
  });
  const repair = await runJob(repairJob, {
    simulator: opts.simulator,
    transport: opts.transport,
    logger: opts.logger,
    windows: before.differing,
    now: opts.now,
  });
  // Verified again, the same selection: a repair is not taken on its word (one request per scope while it holds).
  const after = await verify();
  return { ...after, repair, beforeRepair: before };
}

/** The findings into `verifications`, the requests into `request_usage`: the lake's own ledger, either kind. */
async function recordSession(job: Job, target: VerifyTarget, result: VerifyResult, at: Date): Promise<void> {
  const day = at.toISOString().slice(0, 10);
  const account = verifyAccount(job);
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
