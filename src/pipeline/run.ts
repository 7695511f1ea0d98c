import { randomBytes } from 'node:crypto';
import { ledgerWriter } from '../load/quota-ledger.js';
import { existsSync } from 'node:fs';
import path from 'node:path';
import pLimit from 'p-limit';
import type { DatasetDef } from '../datasets/dataset.js';
import { Accounting } from '../extract/accounting.js';
import { WindowProgress } from '../extract/pager.js';
import { Catalog, CatalogLockedError, type RequestUsage, type WindowRecord } from '../load/catalog.js';
import { keptListPath } from '../load/write/kept-list.js';
import { removeDurable } from '../load/write/durable.js';
import { QuotaReachedError, quotaAccount, RequestQuota } from '../extract/quota.js';
import { readRequestUsage } from '../load/state.js';
import type { CommittedFile } from '../load/write/commit.js';
import { openEngine, type Engine } from '../load/engine.js';
import { JOURNAL_FILE } from '../load/write/journal.js';
import { voidWatermarks } from '../load/ledger/watermarks.js';
import { datasetShape, REJECTS_SHAPE } from '../load/schema.js';
import { LakeLock, LakeLockedError } from '../load/lock.js';
import { LakePaths } from '../load/paths.js';
import { READER_HOLDER_PREFIX } from '../load/read/reader.js';
import { recoverLake, removeTakenKept, settleHeld } from '../load/write/recovery.js';
import { closeRunStaging, openRunStaging } from '../load/write/staging.js';
import { RunDecoder } from './decode-in-run.js';
import { RowTransformer } from '../transform/rows.js';
import { BatchCommitter } from './committer.js';
import { LakeChangedError } from '../ducklake/conflicts.js';
import { giveUpKept, type WindowKey } from '../load/ledger/windows.js';
import { keepWindows, keptSummaryOf, takeKept, type KeptSummary } from './kept.js';
import { countsOf, executeWindow, failureOf, type Clients, type WindowOutcome } from './execute.js';
import { openSource, type Source, type SourceOptions } from './source.js';
import type { Job } from './job.js';
import { LiveRun } from './live.js';
import { silentLogger, type Logger } from './log.js';
import { effectiveJob, localPlanLedger, pagerOptionsOf, windowsToFetch, type Prepared } from './prepare.js';
import type { FoundHead } from '../extract/head.js';
import { WINDOW_ROWS, isProvisional, windowIdOf, type Window } from './plan.js';
import { emptyDatasetReport, interruptedSummary, sumReports, type DatasetReport, type RunReport } from './report.js';
import { receivingBodies } from './garbage.js';

export interface RunOptions extends Pick<SourceOptions, 'simulator' | 'transport' | 'transportInstance'> {
  logger?: Logger;
  now?: () => Date;
  /** Ignore watermarks and any unfinished earlier run: fetch the job's whole range again. */
  fullRefresh?: boolean;
  /** `--from-block/--to-block`: an explicit range for this run only (no resume, no incremental narrowing). */
  rangeOverride?: { fromBlock?: number; toBlock?: number; head?: number };
  /** If another run holds the lake, wait for it (polling) instead of failing with LakeLockedError. */
  waitForLock?: boolean;
  /** Receives the live state of the run as it starts (progress displays). */
  onStart?: (live: LiveRun) => void;
  /**
   * Aborted (Ctrl-C, SIGTERM): no request starts, a window in mid-fetch stops and is left to do (none of its
   * pages is committed), every window already fetched is committed, and the run ends `interrupted` (the next
   * run resumes it, fetching only what this one did not commit).
   */
  signal?: AbortSignal;
  /** false: stage no page as received; every entry goes through the converters (tests compare both ways). */
  stageReceived?: boolean;
  /** Fresh rows a commit merges at once (default MERGE_SLICE_ROWS); tests make it small to merge in many slices. */
  mergeSliceRows?: number;
  /** Rows after which a joined window stops and the next one continues (default WINDOW_ROWS); tests make it small. */
  windowRows?: number;
  /** Fetch exactly these windows instead of what the job plans (`verify --repair`: the windows that differ). */
  windows?: Window[];
}

/** How a head was found, for the run's first log line. */
function headHow(found: FoundHead | undefined): string {
  if (!found || found.how === 'latest') return '';
  if (found.how === 'given') return ' (given)';
  return ` (blocks/latest refused: ${found.latestRefused}; found by searching /v1/blocks/{n} in ${found.requests} requests)`;
}

export function newRunId(now: Date): string {
  return `${now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')}-${randomBytes(3).toString('hex')}`;
}

/**
 * Runs a job under the lake's lock: pins the head (or the head of the unfinished run it resumes), plans
 * windows, narrows them to what is not yet in the lake, pages each window through transform into staging,
 * and commits finished windows in batches while the rest are still fetching.
 */
export async function runJob(job: Job, opts: RunOptions = {}): Promise<RunReport> {
  const now = opts.now ?? (() => new Date());
  const started = now();
  const runId = newRunId(started);
  const paths = new LakePaths(job.lake.dir);
  const log = opts.logger ?? silentLogger;
  const lock = await acquireLock(paths, runId, opts.waitForLock ?? false, log);
  try {
    return await runLocked(job, opts, { runId, started, paths, log, now });
  } finally {
    await lock.release();
  }
}

/** How long a run waits, even without --wait, for a reader that holds the lock to repair the lake. */
const READER_REPAIR_WAIT_MS = 60_000;

async function acquireLock(paths: LakePaths, runId: string, wait: boolean, log: Logger): Promise<LakeLock> {
  const started = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await LakeLock.acquire(paths.root, runId);
    } catch (e) {
      if (!(e instanceof LakeLockedError)) throw e;
      // A reader (query, status) takes the lock only for the moment it finishes a dead writer's commit or
      // rebuilds a moved lake's views: a run that started then waits it out instead of exiting 75.
      const reader = e.holder?.runId.startsWith(READER_HOLDER_PREFIX) === true && Date.now() - started < READER_REPAIR_WAIT_MS;
      if (!wait && !reader) throw e;
      if (attempt === 0) log.log('info', 'lock.wait', `waiting: ${e.message}`, { lock: e.lockFile });
      await new Promise((r) => setTimeout(r, reader ? 100 : Math.min(10_000, 500 * 2 ** Math.min(attempt, 5))));
    }
  }
}

interface RunContext {
  runId: string;
  started: Date;
  paths: LakePaths;
  log: Logger;
  now: () => Date;
}

async function runLocked(baseJob: Job, opts: RunOptions, ctx: RunContext): Promise<RunReport> {
  const { runId, started, paths, log } = ctx;
  const job = effectiveJob(baseJob, opts.rangeOverride);
  const ingestedAt = started.toISOString();
  // Under the lock: finish a killed run's decided commit, drop dead staging; a moved lake's views are fixed by
  // the run's first open of the catalog (recordStart), not by one more open here (docs/performance.md, "A run's fixed cost").
  await recoverLake(paths, { currentRunId: runId, by: runId, relocate: false });
  const staging = paths.staging(runId);
  await openRunStaging(staging, { runId, job: job.name, startedAt: ingestedAt, pid: process.pid });

  const runAcct = new Accounting();
  // One thread from the start: the loaders and every commit run on one (BatchCommitter), and a second scheduler
  // thread started only to be stopped cost each run a thread and DuckDB's allocator flush (docs/performance.md,
  // "A run's fixed cost").
  const engine = await openEngine({ tempDir: path.join(staging, 'duckdb-tmp'), threads: 1 });
  // The daily quota: what earlier runs spent today (per account) is read first; the head pin counts too.
  const spend = new RunSpend(quotaAccount(job.source.target));
  let source: Source | undefined;
  let recorded: Record<string, unknown> | undefined;
  let stages: RunStages | undefined;
  let failure: unknown;
  try {
    spend.quota = await openQuota(job, engine, ctx, staging, spend.account);
    source = await openSource(job.source, { ...sourceOptions(opts), quota: spend.quota, log });
    const { clients } = source;
    const prepared = await windowsToFetch(
      { baseJob, job, fullRefresh: opts.fullRefresh ?? false, windows: opts.windows },
      localPlanLedger(engine, paths),
      clients,
      runAcct,
      log,
    );
    const kept = await keptOfChain(prepared, paths, log);
    const startRecord = await recordStart(job, ctx, prepared, kept);
    recorded = startRecord;
    stages = await startStages(job, opts, ctx, { engine, staging, prepared, clients, runAcct, kept: kept.outcomes }, () => ({
      ...startRecord,
      requestUsage: spend.usage(),
    }));
    const fetched = await fetchPlanned(job, opts, { prepared, clients, staging, stages, quota: spend.quota, log });
    // Counted as this run's windows (their rows are its commit's), with no request of theirs sent.
    fetched.outcomes.unshift(...kept.outcomes);
    const report = await commitAll(job, ctx, { prepared, fetched, stages, runAcct, spend, interrupted: opts.signal?.aborted === true });
    if (kept.outcomes.length) {
      const { windows, rows, requests } = keptSummaryOf(kept.outcomes);
      report.fromKept = { windows, rows, requests, runs: [...new Set(kept.outcomes.map((o) => o.kept!.runId))] };
    }
    if (stages.decoder) report.decoded = await stages.decoder.finish(report);
    // Their folders, now that no `fetched` window names them; should the catalog be held now, the next recovery does it.
    if (kept.outcomes.length || kept.giveUp.length) await removeTakenKept(paths).catch(() => undefined);
    logKept(report, log);
    return report;
  } catch (e) {
    failure = e;
  } finally {
    engine.close();
    await source?.close();
    failure = await closeRun({ ctx, job, staging, stages, recorded, usage: () => spend.usage(), ingestedAt }, failure);
  }
  throw failure;
}

/** What the run's last step (closeRun) needs of it. */
interface RunEnd {
  ctx: RunContext;
  job: Job;
  staging: string;
  stages: RunStages | undefined;
  /** The run's record from its start; undefined when it failed before recording itself. */
  recorded: Record<string, unknown> | undefined;
  usage: () => RequestUsage | undefined;
  ingestedAt: string;
}

/**
 * The run's last step, whatever happened: its staging removed and, after a failure, the run recorded `failed`. A
 * commit another DuckLake writer kept refusing, or that a user's session holding the catalog kept from happening,
 * first keeps what it would have landed for the next run (kept.ts), moved out of the staging before the staging goes.
 * Returns the error the run ends with (saying what was kept and what is fetched again), or undefined.
 */
async function closeRun(end: RunEnd, failure: unknown): Promise<unknown> {
  const { ctx, job, staging, stages, recorded, ingestedAt } = end;
  const { runId, paths, log, now } = ctx;
  const pending = existsSync(path.join(staging, JOURNAL_FILE));
  const lakeSide = failure instanceof LakeChangedError || failure instanceof CatalogLockedError;
  const notLanded = lakeSide && !pending ? (stages?.committer.notCommitted() ?? []) : [];
  const keeping =
    recorded && notLanded.length
      ? await keepWindows(
          paths,
          { runId, job: job.name, startedAt: ingestedAt },
          staging,
          notLanded.filter((o) => !o.error && !o.kept),
          log,
        )
      : undefined;
  await closeRunStaging(staging);
  // After the staging is gone: a full disk has room again for this one small write.
  if (!recorded || failure === undefined || pending) return failure;
  const ended = endOfNotLanded(notLanded, keeping?.kept ?? []);
  const facts = { ...(ended.kept ? { kept: ended.kept } : {}), ...(ended.fetchedAgain ? { fetchedAgain: ended.fetchedAgain } : {}) };
  const wrote = await recordFailure(
    paths,
    runId,
    job.name,
    ingestedAt,
    now(),
    { ...recorded, requestUsage: end.usage(), ...facts },
    failure,
    log,
    keeping?.rows ?? [],
  );
  // Recorded: the list is done with. Not recorded (the catalog held): the next command's recovery records it.
  if (wrote && keeping?.rows.length) await removeDurable(keptListPath(paths, runId));
  return notLanded.length ? notCommitted(failure as LakeChangedError | CatalogLockedError, ended, log) : failure;
}

/**
 * The kept windows of the chain this run resumes (kept.ts), checked: the sound ones to commit, the others to fetch
 * again (added to the run's windows, and said so); with the job's kept windows no run of this chain kept, given up.
 */
async function keptOfChain(prepared: Prepared, paths: LakePaths, log: Logger): Promise<KeptOfChain> {
  const taken = prepared.resume?.kept ?? [];
  const { outcomes, lost } = await takeKept(paths, taken);
  const giveUp: (WindowKey & { error: string })[] = [];
  for (const l of lost) {
    log.log('warn', 'run.kept_lost', `window ${l.row.windowId} kept by run ${l.row.runId}: ${l.why}; fetched again`, {
      window: l.row.windowId,
      keptBy: l.row.runId,
      why: l.why,
    });
    if (l.window) prepared.windows.unshift(l.window);
    giveUp.push({ runId: l.row.runId, windowId: l.row.windowId, error: `its kept data could not be committed (${l.why}): fetched again` });
  }
  const chain = new Set(taken.map((k) => `${k.runId}\u0000${k.windowId}`));
  for (const k of prepared.state.kept ?? []) {
    if (!chain.has(`${k.runId}\u0000${k.windowId}`))
      giveUp.push({ runId: k.runId, windowId: k.windowId, error: 'kept by a run that a later run did not resume (another head or range): fetched again' });
  }
  if (outcomes.length) {
    const s = keptSummaryOf(outcomes);
    log.log(
      'info',
      'run.kept_taken',
      `${s.windows} windows (${s.rows} rows) an earlier run fetched and kept are committed by this run: their ${s.requests} requests are not sent again`,
      { windows: s.windows, rows: s.rows, requests: s.requests, runs: [...new Set(outcomes.map((o) => o.kept!.runId))] },
    );
  }
  return { outcomes, giveUp };
}

/** The kept windows a run commits, and those of the job it gives up (recorded `failed` with its start). */
interface KeptOfChain {
  outcomes: WindowOutcome[];
  giveUp: (WindowKey & { error: string })[];
}

/** What became of the windows a failed commit did not land: kept for the next run, or fetched again by it. */
interface NotLanded {
  kept?: KeptSummary;
  fetchedAgain?: FetchedAgain;
}

/** `notLanded` split into what is kept (`kept`, and the windows an earlier run kept: still kept) and what is fetched again. */
function endOfNotLanded(notLanded: readonly WindowOutcome[], kept: readonly WindowOutcome[]): NotLanded {
  const held = new Set([...kept, ...notLanded.filter((o) => o.kept && !o.error)]);
  const again = notLanded.filter((o) => !held.has(o));
  return {
    ...(held.size ? { kept: keptSummaryOf([...held]) } : {}),
    ...(again.length ? { fetchedAgain: fetchedAgainOf(again) } : {}),
  };
}

/** What a failed run fetched, no commit took and it could not keep, as its record says: what the next run fetches again. */
interface FetchedAgain {
  windows: number;
  rows: number;
  requests: number;
  /** The windows' ids (dataset/network/scope/from-to), in the order they were fetched. */
  ids: string[];
  /** Windows that failed, whose failure no commit recorded: the next run fetches them again too. */
  failed: string[];
}

function fetchedAgainOf(all: readonly WindowOutcome[]): FetchedAgain {
  const outcomes = all.filter((o) => !o.error);
  return {
    failed: all.filter((o) => o.error).map((o) => o.window.id),
    windows: outcomes.length,
    rows: outcomes.reduce((a, o) => a + o.rows, 0),
    requests: outcomes.reduce((a, o) => a + o.acct.requests, 0),
    ids: outcomes.map((o) => o.window.id),
  };
}

/** Windows a hint names one by one; beyond, it counts them. */
const NAMED_WINDOWS = 5;

/**
 * A commit another DuckLake writer kept refusing (CHAINLAKE_LAKE_CHANGED), or that a user's session holding the catalog
 * kept from happening (CatalogLockedError), ends the run with what it fetched staged.
 * What it could keep (kept.ts), the next run resuming this one commits without sending its requests again, as a
 * distributed worker's `fetched` windows wait for the next commit; what it could not (failed windows, data that could
 * not be kept) the next run fetches again. The error says which, and what they cost.
 */
function notCommitted<E extends LakeChangedError | CatalogLockedError>(error: E, ended: NotLanded, log: Logger): E {
  const { kept, fetchedAgain: again } = ended;
  const parts: string[] = [];
  const fields: Record<string, unknown> = {};
  if (kept) {
    parts.push(
      `the ${kept.windows} windows fetched and not committed (${kept.rows} rows in ${kept.requests} requests: ${named(kept.ids, kept.windows)}) are kept: ` +
        `the next run, which resumes this one, commits them without sending those ${kept.requests} requests again`,
    );
    fields.kept = { ...kept, ids: kept.ids.slice(0, NAMED_WINDOWS) };
  }
  if (again && again.windows > 0) {
    parts.push(
      `the ${again.windows} windows this run fetched and could not keep (${again.rows} rows in ${again.requests} requests: ${named(again.ids, again.windows)}) are fetched again by the next run`,
    );
  }
  if (again?.failed.length)
    parts.push(`the ${again.failed.length} windows that failed (${again.failed.slice(0, NAMED_WINDOWS).join(', ')}) are fetched again by the next run`);
  if (again) fields.fetchedAgain = { ...again, ids: again.ids.slice(0, NAMED_WINDOWS), failed: again.failed.slice(0, NAMED_WINDOWS) };
  if (parts.length === 0) return error;
  const text = parts.join('; ');
  log.log('warn', 'run.not_committed', text, fields);
  return (error instanceof LakeChangedError ? error.fetchedAgain(text) : error.kept(text)) as E;
}

const named = (ids: readonly string[], n: number): string =>
  ids.slice(0, NAMED_WINDOWS).join(', ') + (n > NAMED_WINDOWS ? ` and ${n - NAMED_WINDOWS} more` : '');

/** What a run spends against its account's daily quota, when the job has one. */
class RunSpend {
  quota: RequestQuota | undefined;

  constructor(readonly account: string) {}

  /** The requests sent per day so far, as the run's record carries them (none without a quota). */
  usage(): RequestUsage | undefined {
    return this.quota ? { account: this.account, days: Object.fromEntries(this.quota.sent) } : undefined;
  }
}

/** The source settings a run's options carry (the embedded simulator, a transport or its settings, the signal). */
const sourceOptions = (opts: RunOptions) => ({
  simulator: opts.simulator,
  transport: opts.transport,
  transportInstance: opts.transportInstance,
  signal: opts.signal,
});

/**
 * The last commits (every window fetched is committed, an interrupted run's too) and the report the last one
 * records; the requests of the windows the signal cut short were sent and count.
 */
async function commitAll(
  job: Job,
  ctx: RunContext,
  run: { prepared: Prepared; fetched: Fetched; stages: RunStages; runAcct: Accounting; spend: RunSpend; interrupted: boolean },
): Promise<RunReport> {
  const { prepared, fetched, stages, runAcct, spend } = run;
  let report!: RunReport;
  await stages.committer.finish((files) => {
    report = finalReport(
      job,
      ctx,
      { prepared, fetched, files, transformers: stages.transformers, runAcct },
      {
        quota: spend.quota,
        account: spend.account,
        usage: spend.usage(),
        interrupted: run.interrupted,
        left: fetched.cutShort.length + fetched.notStarted,
      },
    );
    return { job: job.name, startedAt: ctx.started.toISOString(), finishedAt: report.finishedAt, status: report.status, report };
  });
  return report;
}

/** The daily quota (what earlier runs spent today read first), when the job has one; refused when none is left. */
async function openQuota(job: Job, engine: Engine, ctx: RunContext, staging: string, account: string): Promise<RequestQuota | undefined> {
  if (job.source.dailyRequestQuota === undefined) return undefined;
  const quota = new RequestQuota(job.source.dailyRequestQuota, await readRequestUsage(engine, ctx.paths, account), ctx.now, ledgerWriter(staging, account));
  if (quota.remainingToday() === 0) throw new QuotaReachedError(quota.limit);
  return quota;
}

/** An interrupted run says what it kept. */
function logKept(report: RunReport, log: Logger): void {
  const kept = interruptedSummary(report);
  if (kept)
    log.log('warn', 'run.kept', kept, {
      windows: report.totals.windows - report.totals.windowsFailed,
      rows: report.totals.rows,
      windowsLeft: report.windowsLeft,
    });
}

/** What a run fetches and commits with: its live progress, each dataset's row transformer, the decoder and the committer. */
interface RunStages {
  live: LiveRun;
  /** The transformers made so far, by dataset (their counts go into the report). */
  transformers: Map<string, RowTransformer>;
  transformerFor(def: DatasetDef): RowTransformer;
  decoder: RunDecoder | undefined;
  committer: BatchCommitter;
}

/** The planned windows fetched, each handed to the committer as it is fetched. */
function fetchPlanned(
  job: Job,
  opts: RunOptions,
  parts: { prepared: Prepared; clients: Clients; staging: string; stages: RunStages; quota: RequestQuota | undefined; log: Logger },
): Promise<Fetched> {
  const { stages } = parts;
  return fetchWindows(parts.prepared.windows, {
    job,
    clients: parts.clients,
    staging: parts.staging,
    live: stages.live,
    log: parts.log,
    transformerFor: stages.transformerFor,
    quota: parts.quota,
    signal: opts.signal,
    windowRows: opts.windowRows,
    onFetched: (outcome) => stages.committer.add(outcome),
  });
}

/** The run's stages, once its windows are planned and its start recorded (`interim`: its start record as of now). */
async function startStages(
  job: Job,
  opts: RunOptions,
  ctx: RunContext,
  parts: { engine: Engine; staging: string; prepared: Prepared; clients: Clients; runAcct: Accounting; kept: readonly WindowOutcome[] },
  interim: () => Record<string, unknown>,
): Promise<RunStages> {
  const { runId, paths, log } = ctx;
  const ingestedAt = ctx.started.toISOString();
  const live = new LiveRun(runId, job.name);
  for (const w of parts.prepared.windows) live.dataset(w.def.name).windowsTotal++;
  opts.onStart?.(live);
  const transformers = new Map<string, RowTransformer>();
  const decoder = job.what.decode
    ? new RunDecoder(job.what, {
        engine: parts.engine,
        paths,
        runId,
        ingestedAt,
        stagingDir: parts.staging,
        log,
        explorer: parts.clients.explorer,
        acct: parts.runAcct,
      })
    : undefined;
  await decoder?.start();
  const committer = batchCommitterOf(job, ctx, { ...parts, decoder, mergeSliceRows: opts.mergeSliceRows }, interim);
  // Kept windows first: they are fetched already, and commit with the first batch their dataset's policy takes.
  for (const o of parts.kept) {
    const ds = live.dataset(o.window.def.name);
    ds.windowsTotal++;
    ds.windowsDone++;
    ds.rows += o.rows;
    ds.rejects += o.rejects;
    committer.add(o);
  }
  return { live, transformers, transformerFor: (def) => transformerOf(transformers, def, job, ingestedAt, opts), decoder, committer };
}

/** What a run's report is made of: its plan, what it fetched, the files its commits wrote, its transformers and requests outside windows (the head pin). */
interface ReportInputs {
  prepared: Prepared;
  fetched: Fetched;
  files: readonly CommittedFile[];
  transformers: Map<string, RowTransformer>;
  runAcct: Accounting;
}

/**
 * The run's report over what it fetched and the files its commits wrote, with how it ended (endStatus); a run that
 * failed says which origins never answered.
 */
function finalReport(job: Job, ctx: RunContext, run: ReportInputs, end: Parameters<typeof endStatus>[1]): RunReport {
  const { fetched, runAcct } = run;
  const report = buildReport(job, ctx, run);
  endStatus(report, end);
  const unreachable = unreachableOrigins(fetched.outcomes, runAcct);
  if (report.status === 'failed' && unreachable) report.unreachable = unreachable;
  return report;
}

/**
 * The run's committer: batches of what is fetched (the job's commit policy), each window's record, and the run's
 * interim record (`interim`: its start record as of now) until the last commit records the report.
 */
function batchCommitterOf(
  job: Job,
  ctx: RunContext,
  parts: {
    engine: Engine;
    staging: string;
    prepared: Prepared;
    kept: readonly WindowOutcome[];
    decoder: RunDecoder | undefined;
    mergeSliceRows: number | undefined;
  },
  interim: () => Record<string, unknown>,
): BatchCommitter {
  const { runId, paths, log, now } = ctx;
  const ingestedAt = ctx.started.toISOString();
  const { state, committedRanges, windows } = parts.prepared;
  return new BatchCommitter(
    {
      engine: parts.engine,
      paths,
      runId,
      ingestedAt,
      stagingDir: parts.staging,
      network: job.what.network,
      watermarks: state.watermarks,
      rangeStart: job.what.range.fromBlock,
      committedRanges,
      log,
      now: () => now().getTime(),
      mergeSliceRows: parts.mergeSliceRows,
      decoder: parts.decoder,
      windowsPerDataset: [...windows, ...parts.kept.map((o) => o.window)].reduce(
        (m, w) => m.set(w.def.name, (m.get(w.def.name) ?? 0) + 1),
        new Map<string, number>(),
      ),
    },
    job.lake.commit,
    (o) => windowRecord(runId, o),
    () => ({ job: job.name, startedAt: ingestedAt, finishedAt: null, status: 'running', report: interim() }),
  );
}

/** The dataset's row transformer, made on first use and kept for the run (its counts go into the report). */
function transformerOf(transformers: Map<string, RowTransformer>, def: DatasetDef, job: Job, ingestedAt: string, opts: RunOptions): RowTransformer {
  let t = transformers.get(def.name);
  if (!t) {
    t = new RowTransformer(def, { network: job.what.network, snapshotDate: ingestedAt.slice(0, 10), stageReceived: opts.stageReceived });
    transformers.set(def.name, t);
  }
  return t;
}

/**
 * How the run ended beyond its windows: the day's quota it used (stopped by the quota is no failure of the service,
 * and the next run resumes where this one stopped), and an interrupted run's windows left (cut short, not started,
 * failed).
 */
function endStatus(
  report: RunReport,
  end: { quota: RequestQuota | undefined; account: string; usage: RequestUsage | undefined; interrupted: boolean; left: number },
): void {
  const { quota } = end;
  if (quota) {
    report.requestUsage = end.usage;
    report.quota = { account: end.account, limit: quota.limit, usedToday: quota.usedToday(), reached: quota.reached };
    if (quota.reached) report.status = 'quota_reached';
  }
  if (end.interrupted) {
    report.status = 'interrupted';
    report.windowsLeft = end.left + report.totals.windowsFailed;
  }
}

/**
 * The run's start step: records it as `running` before any fetch, so that a killed run is known (and resumed)
 * by the next run of the job, and says what it will fetch. Returns the record its end (or failure) completes.
 */
async function recordStart(job: Job, ctx: RunContext, prepared: Prepared, kept: KeptOfChain): Promise<Record<string, unknown>> {
  const { runId, paths, log } = ctx;
  const { resume, head, found, range, skipped, windows } = prepared;
  const ingestedAt = ctx.started.toISOString();
  const startRecord = {
    runId,
    job: job.name,
    network: job.what.network,
    head,
    range,
    incremental: job.what.range.incremental,
    resumeOf: resume?.runId ?? null,
    // In the record from the start: a run resuming this one's chain leaves out what the lake lost (ledger/planning.ts).
    ...(prepared.voided.length ? { voided: prepared.voided } : {}),
  };
  await Catalog.hold(paths, async (c) => {
    // What recovery left to this first open of the catalog (runLocked): a killed run whose staging is gone recorded
    // abandoned (before its committed windows would count as a live run's claims below), a moved lake's views.
    await settleHeld(c, runId);
    // The tables the run will write, created now if the lake lacks them: a fresh lake's first commit would otherwise
    // create them while windows fetch, where each of its statements waits for the busy event loop, and the commits
    // after it wait for that one (docs/performance.md, "Commits"). A table another DuckLake writer renamed or
    // retyped is refused here, before a request is sent and before the run is recorded (dropped: see below).
    // The watermarks of a table another writer dropped (planning voided them) go in the same transaction that makes
    // it again: after it, nothing could tell they were void (ledger/planning.ts voidClaims).
    const shapes = [...new Set(windows.map((w) => w.def))].map(datasetShape);
    const voided = prepared.voided.map((v) => v.dataset);
    if (shapes.length > 0 || voided.length > 0)
      await c.transaction(async () => {
        await voidWatermarks({ db: c.lake }, voided);
        if (shapes.length > 0) await c.ensureTables([...shapes, REJECTS_SHAPE]);
      });
    // Kept windows this run does not commit are given up with its start: a run resuming this one fetches them.
    await c.transaction(async () => {
      await giveUpKept({ db: c.lake }, kept.giveUp);
      await c.recordRun(runId, job.name, ingestedAt, null, 'running', startRecord);
    });
  });
  log.log(
    'info',
    'run.start',
    `run ${runId}: ${job.name} on ${job.what.network}, ${head === null ? 'no head needed (no block-ranged dataset)' : `head ${resume ? `${head} (resuming run ${resume.runId})` : `pinned at block ${head}${headHow(found)}`}, blocks ${range.from}-${range.to}`}: ${windows.length} windows to fetch${kept.outcomes.length ? `, ${kept.outcomes.length} fetched and kept by an earlier run to commit` : ''}${skipped ? `, ${skipped} already in the lake` : ''}`,
    {
      ...startRecord,
      windows: windows.length,
      kept: kept.outcomes.length,
      skipped,
      ...(found ? { headFoundBy: found.how, headRequests: found.requests, latestRefused: found.latestRefused } : {}),
    },
  );
  return startRecord;
}

/** What the fetch step needs of the run. */
interface FetchStep {
  job: Job;
  clients: Clients;
  staging: string;
  live: LiveRun;
  log: Logger;
  transformerFor(def: DatasetDef): RowTransformer;
  quota: RequestQuota | undefined;
  signal: AbortSignal | undefined;
  windowRows: number | undefined;
  /** Told of each window as it ends (fetched or failed), in the order they end. */
  onFetched(outcome: WindowOutcome): void;
}

/** What the fetch step leaves for the commit and the report. */
interface Fetched {
  /** Every window that ended, failed ones included (each was handed to onFetched). */
  outcomes: WindowOutcome[];
  /** Windows the signal cut short: their requests were sent and count; their pages are not committed. */
  cutShort: WindowOutcome[];
  /** Windows the signal left unstarted (the quota stops the rest without counting them here). */
  notStarted: number;
}

/**
 * The run's fetch step: pages the windows `concurrency` at a time into staging, continues a window cut at its
 * rows with the rest of its range in the same slot, and stops starting windows at the quota or the signal.
 */
async function fetchWindows(windows: readonly Window[], step: FetchStep): Promise<Fetched> {
  const { job, log, signal } = step;
  const slots: FetchSlots = {
    pager: pagerOptionsOf(job.source, job.what.range.fixedChunks ? undefined : (step.windowRows ?? WINDOW_ROWS)),
    log: interruptionAsDebug(log, signal),
    nextIndex: 0,
    fetched: { outcomes: [], cutShort: [], notStarted: 0 },
  };
  const limitWindows = pLimit(job.source.concurrency);
  await receivingBodies(() => Promise.all(windows.map((first) => limitWindows(() => fetchSlot(first, step, slots)))));
  return slots.fetched;
}

/** What the windows fetched side by side share. */
interface FetchSlots {
  pager: ReturnType<typeof pagerOptionsOf>;
  log: Logger;
  /** The index of the next window started, for its staging names. */
  nextIndex: number;
  fetched: Fetched;
}

/** A window the signal cuts short did not fail (the next run fetches it): its end is a debug line, not an error. */
function interruptionAsDebug(log: Logger, signal: AbortSignal | undefined): Logger {
  if (!signal) return log;
  return {
    log: (level, event, message, fields) =>
      signal.aborted && event === 'window.failed' ? log.log('debug', 'window.interrupted', message, fields) : log.log(level, event, message, fields),
  };
}

/** One slot: a window, then the windows that continue it where it stopped at its rows. */
async function fetchSlot(first: Window, step: FetchStep, slots: FetchSlots): Promise<void> {
  const { live, quota, signal } = step;
  const { fetched } = slots;
  for (let w: Window | undefined = first; w;) {
    // At the quota (or on a signal) the run stops fetching: what is in flight ends, what committed stays, the next run resumes.
    if (quota?.reached) break;
    if (signal?.aborted) {
      fetched.notStarted++;
      break;
    }
    const liveDs = live.dataset(w.def.name);
    const outcome = await fetchWindow(w, step, slots);
    // A window the interruption cut short is not a failure: it was not done, and the next run fetches it (its
    // requests were sent and count; its pages are not committed). One that failed for another reason while the
    // signal came is left to do the same way. A window that completed, even as the signal came, is fetched: it is
    // committed with the others.
    if (outcome.error && signal?.aborted) {
      fetched.cutShort.push(outcome);
      return;
    }
    if (outcome.error) liveDs.windowsFailed++;
    else liveDs.windowsDone++;
    fetched.outcomes.push(outcome);
    step.onFetched(outcome);
    const rest = outcome.rest;
    w = rest && !outcome.error ? { ...w, range: rest, id: windowIdOf(w.def.name, w.network, w.scopeKey, rest) } : undefined;
    if (w) liveDs.windowsTotal++;
  }
}

/** One window paged into staging, counted in the run's live progress as its pages come. */
function fetchWindow(w: Window, step: FetchStep, slots: FetchSlots): Promise<WindowOutcome> {
  const { job, clients, staging, live, transformerFor, signal } = step;
  const liveDs = live.dataset(w.def.name);
  const acct = new Accounting();
  const progress = new WindowProgress();
  live.windows.push({ dataset: w.def.name, acct, progress });
  return executeWindow(w, {
    clients,
    transformer: transformerFor(w.def),
    pager: slots.pager,
    stagingDir: staging,
    index: slots.nextIndex++,
    strict: job.lake.strict,
    log: slots.log,
    acct,
    progress,
    onPage: (rows, rejects) => {
      if (signal?.aborted) throw new Error('interrupted');
      liveDs.rows += rows;
      liveDs.rejects += rejects;
    },
  });
}

/**
 * A run that stops on an error after recording itself (a commit that hit a full disk, a catalog that stayed
 * locked) is marked `failed` with the error, not left saying `running` for good: the process lives on, so no
 * later recovery would find it dead. Best effort, briefly, on a fresh engine (the run's may be broken by the
 * error): the lake may refuse this write too. A run that left a decided commit pending is not marked here:
 * the next command finishes that commit, and recovery marks the run then.
 */
async function recordFailure(
  paths: LakePaths,
  runId: string,
  job: string,
  startedAt: string,
  finished: Date,
  startRecord: Record<string, unknown>,
  error: unknown,
  log: Logger,
  kept: readonly WindowRecord[],
): Promise<boolean> {
  const message = error instanceof Error ? error.message : String(error);
  try {
    // The kept windows with the run's end: without their rows, their kept files are an orphan recovery removes.
    await Catalog.hold(
      paths,
      (c) =>
        c.transaction(async () => {
          await c.recordRun(runId, job, startedAt, finished.toISOString(), 'failed', { ...startRecord, error: message });
          await c.recordWindows(kept);
        }),
      { waitMs: 5_000 },
    );
    return true;
  } catch (e) {
    log.log('warn', 'run.record-failed', `could not record run ${runId} as failed: ${(e as Error).message}`, { runId });
    return false;
  } finally {
    await closeRunStaging(paths.staging(runId));
  }
}

function windowRecord(runId: string, o: WindowOutcome): WindowRecord {
  return {
    runId,
    dataset: o.window.def.name,
    network: o.window.network,
    scope: o.window.scopeKey,
    fromBlock: o.window.range?.from ?? null,
    toBlock: o.window.range?.to ?? null,
    ...countsOf(o),
    status: o.error ? 'failed' : isProvisional(o.window) ? 'provisional' : 'committed',
    error: o.error ?? null,
    windowId: o.window.id,
    calls: o.acct.calls,
  };
}

function buildReport(job: Job, ctx: RunContext, run: ReportInputs): RunReport {
  const { prepared, fetched, runAcct } = run;
  const { outcomes, cutShort } = fetched;
  const finished = ctx.now();
  const datasets = datasetReports(job, fetched, run.files);
  // Every request of the run: the windows' (each window's requests, abandoned pages and refetches included,
  // and those of windows an interruption cut short) and the head pin's.
  const outsideWindows = { requests: runAcct.requests, retries: runAcct.retries, throttles: runAcct.throttles };
  const totals = sumReports(datasets, outsideWindows);
  const all = new Accounting();
  for (const o of [...outcomes, ...cutShort]) all.add(o.acct);
  all.add(runAcct);
  const unknownFields: Record<string, string[]> = {};
  for (const [name, t] of run.transformers) if (t.unknownFields.size) unknownFields[name] = [...t.unknownFields.keys()].sort();
  const failed = outcomes.filter((o) => o.error);
  return {
    runId: ctx.runId,
    job: job.name,
    network: job.what.network,
    status: failed.length === 0 ? 'complete' : failed.length === outcomes.length ? 'failed' : 'partial',
    startedAt: ctx.started.toISOString(),
    finishedAt: finished.toISOString(),
    durationMs: finished.getTime() - ctx.started.getTime(),
    head: prepared.head,
    windowsSkipped: prepared.skipped,
    resumeOf: prepared.resume?.runId ?? null,
    ...(prepared.voided.length ? { voided: prepared.voided } : {}),
    datasets,
    outsideWindows,
    totals,
    failures: { ...all.failures },
    ...(all.absent > 0 ? { notVerified: all.absent } : {}),
    errors: failed.map(failureOf),
    unknownFields,
    lake: ctx.paths.root,
  };
}

/**
 * Each dataset's windows, rows, requests and files: the windows an interruption cut short count their requests
 * only; a partition rewritten by several batch commits is one file.
 */
function datasetReports(job: Job, fetched: Fetched, files: readonly CommittedFile[]): DatasetReport[] {
  const per = new Map<string, DatasetReport>();
  for (const ds of job.what.datasets) per.set(ds.name, emptyDatasetReport(ds.name));
  for (const o of fetched.outcomes) {
    const r = per.get(o.window.def.name)!;
    r.windows++;
    if (o.error) r.windowsFailed++;
    else {
      r.rows += o.rows;
      r.rejects += o.rejects;
    }
    r.requests += o.acct.requests;
    r.retries += o.acct.retries;
    r.throttles += o.acct.throttles;
  }
  for (const o of fetched.cutShort) {
    const r = per.get(o.window.def.name)!;
    r.requests += o.acct.requests;
    r.retries += o.acct.retries;
    r.throttles += o.acct.throttles;
  }
  // Each version of a partition has a name of its own, so the partition, not the path, says which versions are
  // one file: its last one counts.
  const current = new Map(files.map((f) => [`${f.dataset}\0${f.network}\0${f.partition}`, f]));
  for (const f of current.values()) {
    const r = per.get(f.dataset);
    if (!r) continue;
    r.files++;
    r.bytes += f.bytes;
    r.landed += f.runRows ?? 0;
  }
  return [...per.values()];
}

/** The origins nothing answered at, when every window failed that way and not one response came back. */
function unreachableOrigins(outcomes: readonly WindowOutcome[], runAcct: Accounting): string[] | undefined {
  if (outcomes.length === 0 || runAcct.responses > 0) return undefined;
  if (!outcomes.every((o) => o.unreachable !== undefined && o.acct.responses === 0)) return undefined;
  return [...new Set(outcomes.map((o) => o.unreachable!))];
}
