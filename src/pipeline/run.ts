import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import pLimit from 'p-limit';
import type { DatasetDef } from '../datasets/dataset.js';
import { Accounting } from '../extract/accounting.js';
import { PageBudget } from '../extract/budget.js';
import { ExplorerClient } from '../extract/explorer.js';
import { FinanceClient } from '../extract/finance.js';
import { LearnedCap, WindowProgress, type PagerOptions } from '../extract/pager.js';
import { HttpTransport, type TransportOptions } from '../extract/transport.js';
import { Catalog, type WindowRecord } from '../load/catalog.js';
import type { CommittedFile } from '../load/commit.js';
import { openEngine } from '../load/engine.js';
import { JOURNAL_FILE } from '../load/journal.js';
import { LakeLock, LakeLockedError } from '../load/lock.js';
import { LakePaths } from '../load/paths.js';
import { READER_HOLDER_PREFIX } from '../load/reader.js';
import { recoverLake } from '../load/recovery.js';
import { closeRunStaging, openRunStaging } from '../load/staging.js';
import { decodeAfterExport } from '../decode/in-run.js';
import { RowTransformer } from '../transform/rows.js';
import { BatchCommitter } from './committer.js';
import { executeWindow, type Clients, type WindowOutcome } from './execute.js';
import type { Job } from './job.js';
import { LiveRun } from './live.js';
import { silentLogger, type Logger } from './log.js';
import { effectiveJob, prepareRun } from './prepare.js';
import { emptyDatasetReport, sumReports, type DatasetReport, type RunReport } from './report.js';
import { GarbagePacer } from './garbage.js';

export interface RunOptions {
  logger?: Logger;
  /** Overrides for tests: retry/timeouts of the transport. */
  transport?: Partial<TransportOptions>;
  /** Reached when the embedded simulator is the target; a test may pass an already running one. */
  simulator?: { urls: { mainnet: string; testnet: string; testnetAlt: string; finance: string }; apiKey: string };
  now?: () => Date;
  /** Ignore watermarks and any unfinished earlier run: fetch the job's whole range again. */
  fullRefresh?: boolean;
  /** `--from-block/--to-block`: an explicit range for this run only (no resume, no incremental narrowing). */
  rangeOverride?: { fromBlock?: number; toBlock?: number };
  /** If another run holds the lake, wait for it (polling) instead of failing with LakeLockedError. */
  waitForLock?: boolean;
  /** Receives the live state of the run as it starts (progress displays). */
  onStart?: (live: LiveRun) => void;
  /**
   * A transport to use instead of a new HTTP one (the benchmark replays recorded pages through it, so the
   * rest of the run is measured without HTTP). The run closes it.
   */
  transportInstance?: HttpTransport;
  /** false: stage no page as received; every entry goes through the converters (tests compare both ways). */
  stageReceived?: boolean;
  /** Fresh rows a commit merges at once (default MERGE_SLICE_ROWS); tests make it small to merge in many slices. */
  mergeSliceRows?: number;
}

export function newRunId(now: Date): string {
  return `${now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')}-${randomBytes(3).toString('hex')}`;
}

/** The HTTP settings a job asks for. */
export function transportOptionsOf(job: Job): TransportOptions {
  return { concurrency: job.concurrency, rps: job.rps, burst: job.burst, retry: job.retry, timeouts: job.timeouts };
}

export interface Targets {
  explorer: string;
  explorerAlt?: string;
  finance?: string;
  apiKey?: string;
  close(): Promise<void>;
}

export async function resolveTargets(job: Job, opts: Pick<RunOptions, 'simulator'>): Promise<Targets> {
  if (job.target.kind === 'api') {
    return { explorer: job.target.explorer, explorerAlt: job.target.explorerAlt, finance: job.target.finance, apiKey: job.apiKey, close: async () => {} };
  }
  if (opts.simulator) {
    const s = opts.simulator;
    return { explorer: s.urls[job.network], explorerAlt: s.urls.testnetAlt, finance: s.urls.finance, apiKey: s.apiKey, close: async () => {} };
  }
  const { startSimulator } = await import('../simulator/index.js');
  const sim = await startSimulator({ seed: job.target.seed, scale: job.target.scale, host: '127.0.0.1', port: 0 });
  return { explorer: sim.urls[job.network], explorerAlt: sim.urls.testnetAlt, finance: sim.urls.finance, apiKey: sim.apiKey, close: () => sim.close() };
}

/** The explorer client always (it pins the head); the finance client when a finance base URL is known. */
export function buildClients(transport: HttpTransport, targets: Targets, job: Job): Clients {
  return {
    explorer: new ExplorerClient(transport, { baseUrl: targets.explorer, altBaseUrl: targets.explorerAlt, apiKey: targets.apiKey, network: job.network }),
    finance: targets.finance ? new FinanceClient(transport, { baseUrl: targets.finance }) : undefined,
  };
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
  const paths = new LakePaths(job.lake);
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
  const { runId, started, paths, log, now } = ctx;
  const job = effectiveJob(baseJob, opts.rangeOverride);
  const ingestedAt = started.toISOString();
  // Under the lock: finish a killed run's decided commit, drop dead staging, fix a moved lake's views.
  await recoverLake(paths, { currentRunId: runId, by: runId });
  const staging = paths.staging(runId);
  await openRunStaging(staging, { runId, job: job.name, startedAt: ingestedAt, pid: process.pid });

  const targets = await resolveTargets(job, opts);
  const transport = opts.transportInstance ?? new HttpTransport({ ...transportOptionsOf(job), ...opts.transport });
  const clients = buildClients(transport, targets, job);
  const runAcct = new Accounting();
  const engine = await openEngine({ tempDir: path.join(staging, 'duckdb-tmp') });
  let recorded: Record<string, unknown> | undefined;
  let failure: unknown;
  try {
    const { state, resume, head, range, windows, skipped, committedRanges } = await prepareRun(job, job !== baseJob, opts.fullRefresh ?? false, engine, paths, clients, runAcct);

    const startRecord = { runId, job: job.name, network: job.network, head, range, incremental: job.range.incremental, resumeOf: resume?.runId ?? null };
    // Recorded before any fetch, so a killed run is known (and resumed) by the next run of the job.
    await Catalog.hold(engine, paths, (c) => c.transaction(() => c.recordRun(runId, job.name, ingestedAt, null, 'running', startRecord)));
    recorded = startRecord;
    log.log(
      'info',
      'run.start',
      `run ${runId}: ${job.name} on ${job.network}, head ${resume ? `${head} (resuming run ${resume.runId})` : `pinned at block ${head}`}, blocks ${range.from}-${range.to}: ${windows.length} windows to fetch${skipped ? `, ${skipped} already in the lake` : ''}`,
      { ...startRecord, windows: windows.length, skipped },
    );

    const live = new LiveRun(runId, job.name);
    for (const w of windows) live.dataset(w.def.name).windowsTotal++;
    opts.onStart?.(live);

    const transformers = new Map<string, RowTransformer>();
    const transformerFor = (def: DatasetDef): RowTransformer => {
      let t = transformers.get(def.name);
      if (!t) transformers.set(def.name, (t = new RowTransformer(def, { network: job.network, snapshotDate: ingestedAt.slice(0, 10), stageReceived: opts.stageReceived })));
      return t;
    };
    const outcomes: WindowOutcome[] = [];
    const committer = new BatchCommitter(
      {
        engine,
        paths,
        runId,
        ingestedAt,
        stagingDir: staging,
        network: job.network,
        watermarks: state.watermarks,
        rangeStart: job.range.fromBlock,
        committedRanges,
        log,
        now: () => now().getTime(),
        mergeSliceRows: opts.mergeSliceRows,
      },
      job.commit,
      (o) => windowRecord(runId, o),
      () => ({ job: job.name, startedAt: ingestedAt, finishedAt: null, status: 'running', report: startRecord }),
    );

    const pager: PagerOptions = {
      pageSize: job.pageSize,
      resultWindow: job.resultWindow,
      prefetch: job.concurrency,
      maxDriftRetries: 3,
      budget: new PageBudget(job.concurrency * 2),
      // A cap the server states once holds for every window of the run.
      learnedCap: new LearnedCap(),
    };
    const limitWindows = pLimit(job.concurrency);
    const garbage = new GarbagePacer();
    await Promise.all(
      windows.map((w, index) =>
        limitWindows(async () => {
          const liveDs = live.dataset(w.def.name);
          const acct = new Accounting();
          const progress = new WindowProgress();
          live.windows.push({ dataset: w.def.name, acct, progress });
          const outcome = await executeWindow(w, {
            clients,
            transformer: transformerFor(w.def),
            pager,
            stagingDir: staging,
            index,
            strict: job.strict,
            log,
            acct,
            progress,
            onPage: (rows, rejects, bytes) => {
              liveDs.rows += rows;
              liveDs.rejects += rejects;
              garbage.add(bytes);
            },
          });
          if (outcome.error) liveDs.windowsFailed++;
          else liveDs.windowsDone++;
          outcomes.push(outcome);
          committer.add(outcome);
        }),
      ),
    );

    let report!: RunReport;
    await committer.finish((files) => {
      report = buildReport(job, runId, started, now(), head, outcomes, files, transformers, paths, skipped, resume?.runId, runAcct);
      return { job: job.name, startedAt: ingestedAt, finishedAt: report.finishedAt, status: report.status, report };
    });
    if (job.decode) report.decoded = await decodeAfterExport(job, { engine, paths, runId, ingestedAt, stagingDir: staging, log, explorer: clients.explorer }, report);
    return report;
  } catch (e) {
    failure = e;
    throw e;
  } finally {
    engine.close();
    await transport.close();
    await targets.close();
    const pending = existsSync(path.join(staging, JOURNAL_FILE));
    await closeRunStaging(staging);
    // After the staging is gone: a full disk has room again for this one small write.
    if (recorded && failure !== undefined && !pending) await recordFailure(paths, runId, job.name, ingestedAt, now(), recorded, failure, log);
  }
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
): Promise<void> {
  const message = error instanceof Error ? error.message : String(error);
  const tempDir = path.join(paths.staging(runId), 'duckdb-tmp');
  try {
    const engine = await openEngine({ tempDir, memoryLimit: '64MB' });
    try {
      await Catalog.hold(
        engine,
        paths,
        (c) => c.transaction(() => c.recordRun(runId, job, startedAt, finished.toISOString(), 'failed', { ...startRecord, error: message })),
        { waitMs: 5_000 },
      );
    } finally {
      engine.close();
    }
  } catch (e) {
    log.log('warn', 'run.record-failed', `could not record run ${runId} as failed: ${(e as Error).message}`, { runId });
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
    rowsExpected: o.progress.rowsExpected,
    rowsGot: o.progress.rowsGot,
    rejects: o.rejects,
    requests: o.acct.requests,
    retries: o.acct.retries,
    throttles: o.acct.throttles,
    capHits: o.progress.capHits,
    splits: o.progress.splits,
    status: o.error ? 'failed' : 'committed',
    error: o.error ?? null,
  };
}

function buildReport(
  job: Job,
  runId: string,
  started: Date,
  finished: Date,
  head: number | null,
  outcomes: readonly WindowOutcome[],
  files: readonly CommittedFile[],
  transformers: Map<string, RowTransformer>,
  paths: LakePaths,
  skipped: number,
  resumeOf: string | undefined,
  /** What the run sent outside its windows (the head pin). */
  runAcct: Accounting,
): RunReport {
  const per = new Map<string, DatasetReport>();
  for (const ds of job.datasets) per.set(ds.name, emptyDatasetReport(ds.name));
  for (const o of outcomes) {
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
  // A partition rewritten by several batch commits is one file: count its last version.
  const current = new Map(files.map((f) => [f.path, f]));
  for (const f of current.values()) {
    const r = per.get(f.dataset);
    if (!r) continue;
    r.files++;
    r.bytes += f.bytes;
  }
  const datasets = [...per.values()];
  // Every request of the run: the windows' (each window's requests, abandoned pages and refetches included)
  // and the head pin's.
  const outsideWindows = { requests: runAcct.requests, retries: runAcct.retries, throttles: runAcct.throttles };
  const totals = sumReports(datasets, outsideWindows);
  const all = new Accounting();
  for (const o of outcomes) all.add(o.acct);
  all.add(runAcct);
  const unknownFields: Record<string, string[]> = {};
  for (const [name, t] of transformers) if (t.unknownFields.size) unknownFields[name] = [...t.unknownFields.keys()].sort();
  const failed = outcomes.filter((o) => o.error);
  return {
    runId,
    job: job.name,
    network: job.network,
    status: failed.length === 0 ? 'complete' : failed.length === outcomes.length ? 'failed' : 'partial',
    startedAt: started.toISOString(),
    finishedAt: finished.toISOString(),
    durationMs: finished.getTime() - started.getTime(),
    head,
    windowsSkipped: skipped,
    resumeOf: resumeOf ?? null,
    datasets,
    outsideWindows,
    totals,
    failures: { ...all.failures },
    errors: failed.map((o) => ({ window: o.window.id, error: o.error! })),
    unknownFields,
    lake: paths.root,
  };
}
