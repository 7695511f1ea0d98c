/**
 * The estimate of a run (`chainlake plan`): the windows the run would fetch, planned by the run's own step
 * (windowsToFetch) against either kind of lake's ledger, with the requests, rows, seconds and share of the daily
 * quota they should cost. The CLI prints it (src/cli/commands/plan.ts).
 */
import { rm } from 'node:fs/promises';
import pLimit from 'p-limit';
import { Accounting } from '../extract/accounting.js';
import { openEngine } from '../load/engine.js';
import { LakePaths } from '../load/paths.js';
import type { VoidedClaim } from '../load/ledger/voided.js';
import { NoLakeError } from '../load/read/reader.js';
import type { LakeTarget } from '../lake/open.js';
import { blockTimeRequests } from './block-times.js';
import { fetcherFor, type Clients } from './execute.js';
import type { Job } from './job.js';
import { isProvisional, requestsForRows, type Window } from './plan.js';
import { effectiveJob, localPlanLedger, windowsToFetch, type PlanLedger } from './prepare.js';
import { makeScratch } from '../load/scratch.js';
import { openSource, type SourceOptions } from './source.js';
import { planVerifySession } from './verify/session.js';
import type { VerifyPlan } from './verify/verify.js';

/** One window the run will fetch, as its ledger (`windows`) will record it, with what it should cost. */
export interface WindowEstimate {
  /** The window's id, the ledger's `window_id`: `<dataset>/<network>/<scope>/<from>-<to>` (or `snapshot`). */
  window: string;
  dataset: string;
  scope: string;
  /** null for a window without a block range (a snapshot or a point lookup). */
  fromBlock: number | null;
  toBlock: number | null;
  /** It reaches above the last final block (head − finalityDepth): committed as provisional, fetched again by the next run. */
  provisional: boolean;
  rows: number | null;
  /** Its pages (or its one call), and the block times it is the first window of the run to ask (blockTimeRequests). */
  requests: number;
}

export interface PlanEstimate {
  job: string;
  network: string;
  /** null when the job needs no head (no block-ranged dataset). */
  head: number | null;
  range: { from: number; to: number };
  /** Blocks per planned chunk (range.windowBlocks); chunks of a scope that touch are joined into one window. */
  windowBlocks: number;
  /** The last final block (head − finalityDepth) when the job has an unfinal zone, else null. */
  finalBlock: number | null;
  resumeOf: string | null;
  /** Datasets whose ledger claims are void (their table is gone from the lake, history and all): fetched whole again. */
  voided: VoidedClaim[];
  windows: WindowEstimate[];
  skipped: number;
  /** Windows a failed run of the job kept (fetched, never committed): the run commits them without a request. */
  kept: number;
  /** Requests spent to make this plan (the head, and one count probe per paged window). */
  probeRequests: number;
  estimatedRequests: number;
  estimatedSeconds: number;
  /**
   * What the duration is estimated from: the seconds per request the job's last complete run took on this
   * lake (commits, pages of full size and the API's real latency included), else the probes' latency.
   */
  durationBasis: { kind: 'last-run'; runId: string; requests: number; seconds: number } | { kind: 'probe'; meanLatencyMs: number; concurrency: number };
  /** The lake the run would write: a local lake's folder (absolute), a distributed lake's control plane (its URL without a password). */
  lake: string;
  /** Requests of `estimatedRequests` that ask block times (windows fetched again whose rows carry a time but no block number). */
  blockTimeRequests: number;
  rps: number | null;
  dailyRequestQuota: number | null;
  quotaShare: number | null;
  /** Requests of the daily quota left today (UTC), after what the lake's ledger says runs (or workers) spent today. */
  quotaLeftToday: number | null;
  /**
   * What a full `chainlake verify` of the job's windows the lake holds now would cost (verify --plan's own count):
   * its requests count against the same daily quota. None before the lake exists.
   */
  verify: VerifyPlan;
}

/** Requests a window needs for `rows` rows: the run's rule (requestsForRows). */
function requestsFor(w: Window, rows: number | null, job: Job): number {
  if (rows === null) return 1;
  return requestsForRows(rows, { paged: w.endpoint.paging.kind === 'offset', ranged: w.range !== undefined }, job.source, job.what.range);
}

export interface EstimateOptions extends Pick<SourceOptions, 'simulator' | 'transport'> {
  rangeOverride?: { fromBlock?: number; toBlock?: number; head?: number };
  /** Ask each paged window for its row count (one small request each). */
  probe: boolean;
  fullRefresh?: boolean;
  /** The lake's ledger to plan against: by default the job's local lake (a distributed lake's: distributed/plan-ledger.ts). */
  ledger?: PlanLedger;
  /** The lake a verify would read, the same as `ledger`'s: by default the job's local lake; null when it has no lake yet. */
  verifyTarget?: LakeTarget | null;
}

const NO_VERIFY: VerifyPlan = { windows: 0, requests: 0, exportRequests: 0, notCheckable: 0 };

/** The requests a full verify of `job`'s lake would send, counted by verify --plan's function; none before the lake exists. */
async function verifyEstimate(job: Job, target: LakeTarget | null): Promise<VerifyPlan> {
  if (target === null) return NO_VERIFY;
  try {
    return await planVerifySession(job, target, {});
  } catch (e) {
    if (e instanceof NoLakeError) return NO_VERIFY;
    throw e;
  }
}

/**
 * Each window's estimate: its rows where `probe` asks (a one-entry page's count, for offset-paged listings) and the
 * requests it will cost, block-time lookups included (also returned apart, for the plan's total of them).
 */
async function estimateWindows(
  planned: readonly Window[],
  job: Job,
  clients: Clients,
  acct: Accounting,
  probe: boolean,
): Promise<(WindowEstimate & { blockTimeRequests: number })[]> {
  const times = blockTimeRequests(planned);
  const limit = pLimit(job.source.concurrency);
  return Promise.all(
    planned.map((w, i) =>
      limit(async () => {
        let rows: number | null = null;
        if (probe && w.endpoint.paging.kind === 'offset') rows = (await fetcherFor(w, clients)({ offset: 0, limit: 1, range: w.range }, acct)).count;
        return {
          window: w.id,
          dataset: w.def.name,
          scope: w.scopeKey,
          fromBlock: w.range?.from ?? null,
          toBlock: w.range?.to ?? null,
          provisional: isProvisional(w),
          rows,
          requests: requestsFor(w, rows, job) + times[i]!,
          blockTimeRequests: times[i]!,
        };
      }),
    ),
  );
}

/**
 * How long the requests will take: at the last run's pace where there is one, else from the probes' latency over
 * the requests in flight (the concurrency: a window's pages prefetch, so even one window fills it). The rps limit
 * is a floor under either, never the estimate by itself: when the API's latency over the requests in flight is
 * slower than the limit, the API is the bound. A plan never fails for its estimate.
 */
async function estimateDuration(
  job: Job,
  ledger: PlanLedger,
  acct: Accounting,
  requests: number,
): Promise<{ seconds: number; basis: PlanEstimate['durationBasis'] }> {
  const last = await ledger.lastRun(job).catch(() => undefined);
  const meanLatencyMs = acct.requests > 0 ? acct.latencyMeanMs : 200;
  const inFlight = job.source.concurrency;
  const paced = last ? requests * (last.seconds / last.requests) : (requests * meanLatencyMs) / 1000 / inFlight;
  return {
    seconds: Math.max(paced, job.source.rps ? requests / job.source.rps : 0),
    basis: last ? { kind: 'last-run', ...last } : { kind: 'probe', meanLatencyMs: Math.round(meanLatencyMs), concurrency: inFlight },
  };
}

/**
 * Plans a job against the live API without fetching data: windows, counts, requests, duration. The windows are
 * the ones `run` (a local lake) or `enqueue` (a distributed lake's ledger) would plan now: the same step plans them.
 */
export async function estimatePlan(baseJob: Job, opts: EstimateOptions): Promise<PlanEstimate> {
  const job = effectiveJob(baseJob, opts.rangeOverride);
  const work = await makeScratch('plan');
  const source = await openSource(job.source, { simulator: opts.simulator, transport: opts.transport });
  const { clients } = source;
  const engine = await openEngine({ tempDir: work });
  const acct = new Accounting();
  try {
    const ledger = opts.ledger ?? localPlanLedger(engine, new LakePaths(job.lake.dir));
    // The run's own step: the windows below are the ones `run` would fetch now, not an estimate of them.
    const prepared = await windowsToFetch({ baseJob, job, fullRefresh: opts.fullRefresh ?? false }, ledger, clients, acct);
    const windows = await estimateWindows(prepared.windows, job, clients, acct, opts.probe ?? false);
    const estimatedRequests = windows.reduce((a, w) => a + w.requests, 0);
    // The job as `chainlake verify` reads it (the plan's range flags select what to fetch, not what a verify checks).
    const verify = await verifyEstimate(baseJob, opts.verifyTarget === undefined ? { kind: 'local', lake: job.lake.dir } : opts.verifyTarget);
    const usedToday = job.source.dailyRequestQuota ? await ledger.requestsOn(job, new Date().toISOString().slice(0, 10)) : 0;
    const duration = await estimateDuration(job, ledger, acct, estimatedRequests);
    return {
      job: job.name,
      network: job.what.network,
      head: prepared.head,
      range: prepared.range,
      windowBlocks: job.what.range.windowBlocks,
      finalBlock: prepared.head !== null && job.what.range.finalityDepth > 0 ? prepared.head - job.what.range.finalityDepth : null,
      resumeOf: prepared.resume?.runId ?? null,
      voided: prepared.voided,
      windows: windows.map(({ blockTimeRequests: _, ...w }) => w),
      skipped: prepared.skipped,
      kept: prepared.resume?.kept?.length ?? 0,
      probeRequests: acct.requests,
      estimatedRequests,
      estimatedSeconds: duration.seconds,
      durationBasis: duration.basis,
      lake: ledger.lake,
      blockTimeRequests: windows.reduce((a, w) => a + w.blockTimeRequests, 0),
      rps: job.source.rps ?? null,
      dailyRequestQuota: job.source.dailyRequestQuota ?? null,
      quotaShare: job.source.dailyRequestQuota ? estimatedRequests / job.source.dailyRequestQuota : null,
      quotaLeftToday: job.source.dailyRequestQuota ? Math.max(0, job.source.dailyRequestQuota - usedToday) : null,
      verify,
    };
  } finally {
    engine.close();
    await source.close();
    await rm(work, { recursive: true, force: true });
  }
}
