import { randomBytes } from 'node:crypto';
import path from 'node:path';
import pLimit from 'p-limit';
import type { DatasetDef } from '../datasets/dataset.js';
import { getDataset } from '../datasets/registry.js';
import { Accounting } from '../extract/accounting.js';
import { PageBudget } from '../extract/budget.js';
import { ExplorerClient } from '../extract/explorer.js';
import type { PagerOptions } from '../extract/pager.js';
import { HttpTransport, type TransportOptions } from '../extract/transport.js';
import type { WindowRecord } from '../load/catalog.js';
import type { CommittedFile } from '../load/commit.js';
import { commitRun } from '../load/commit-run.js';
import { openEngine } from '../load/engine.js';
import { LakeLock } from '../load/lock.js';
import { LakePaths } from '../load/paths.js';
import { recoverLake } from '../load/recovery.js';
import { closeRunStaging, openRunStaging } from '../load/staging.js';
import { RowTransformer } from '../transform/rows.js';
import { executeWindow, type Clients, type WindowOutcome } from './execute.js';
import type { Job } from './job.js';
import { jobRange, planWindows } from './plan.js';
import { silentLogger, type Logger } from './log.js';
import { emptyDatasetReport, sumReports, type DatasetReport, type RunReport } from './report.js';

export interface RunOptions {
  logger?: Logger;
  /** Overrides for tests: retry/timeouts of the transport. */
  transport?: Partial<TransportOptions>;
  /** Reached when the embedded simulator is the target; a test may pass an already running one. */
  simulator?: { urls: { mainnet: string; testnet: string; testnetAlt: string; finance: string }; apiKey: string };
  now?: () => Date;
}

export function newRunId(now: Date): string {
  return `${now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')}-${randomBytes(3).toString('hex')}`;
}

async function resolveTargets(
  job: Job,
  opts: RunOptions,
): Promise<{ explorer: string; explorerAlt?: string; finance?: string; apiKey?: string; close(): Promise<void> }> {
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

/**
 * Runs a job: pins the head, plans windows, pages each window through transform into staging, merges the
 * staged rows into the lake, and records runs, windows, files and watermarks in the catalog.
 */
export async function runJob(job: Job, opts: RunOptions = {}): Promise<RunReport> {
  const log = opts.logger ?? silentLogger;
  const now = opts.now ?? (() => new Date());
  const started = now();
  const runId = newRunId(started);
  const ingestedAt = started.toISOString();
  const paths = new LakePaths(job.lake);
  const lock = await LakeLock.acquire(paths.root, runId);
  try {
    return await runLocked(job, opts, { runId, started, ingestedAt, paths, log, now });
  } finally {
    await lock.release();
  }
}

interface RunContext {
  runId: string;
  started: Date;
  ingestedAt: string;
  paths: LakePaths;
  log: Logger;
  now: () => Date;
}

async function runLocked(job: Job, opts: RunOptions, ctx: RunContext): Promise<RunReport> {
  const { runId, started, ingestedAt, paths, log, now } = ctx;
  // Under the lock: finish a killed run's decided commit, drop dead staging, fix a moved lake's views.
  await recoverLake(paths, { currentRunId: runId, by: runId });
  const staging = paths.staging(runId);
  await openRunStaging(staging, { runId, job: job.name, startedAt: ingestedAt, pid: process.pid });

  const targets = await resolveTargets(job, opts);
  const transport = new HttpTransport({ concurrency: job.concurrency, rps: job.rps, ...opts.transport });
  const explorer = new ExplorerClient(transport, { baseUrl: targets.explorer, altBaseUrl: targets.explorerAlt, apiKey: targets.apiKey });
  const runAcct = new Accounting();
  const outcomes: WindowOutcome[] = [];
  let head: number | null = null;
  const engine = await openEngine({ tempDir: path.join(staging, 'duckdb-tmp') });
  try {
    head = await explorer.head(runAcct);
    const range = jobRange(job, head);
    log.log('info', 'run.start', `run ${runId}: ${job.name} on ${job.network}, head pinned at block ${head}, blocks ${range.from}-${range.to}`, {
      runId,
      job: job.name,
      network: job.network,
      head,
    });

    const windows = planWindows(job, head);
    const snapshotDate = ingestedAt.slice(0, 10);
    const transformers = new Map<string, RowTransformer>();
    const transformerFor = (def: DatasetDef): RowTransformer => {
      let t = transformers.get(def.name);
      if (!t) transformers.set(def.name, (t = new RowTransformer(def, { network: job.network, snapshotDate })));
      return t;
    };
    const pager: PagerOptions = {
      pageSize: job.pageSize,
      resultWindow: job.resultWindow,
      prefetch: job.concurrency,
      maxDriftRetries: 3,
      budget: new PageBudget(job.concurrency * 2),
    };
    const limitWindows = pLimit(job.concurrency);
    const clients: Clients = { explorer };
    outcomes.push(
      ...(await Promise.all(
        windows.map((w, index) =>
          limitWindows(() => executeWindow(w, { clients, transformer: transformerFor(w.def), pager, stagingDir: staging, index, strict: job.strict, log })),
        ),
      )),
    );

    // Commit: every completed window's rows, merged per dataset into its partitions.
    const done = outcomes.filter((o) => !o.error);
    const datasets = [...new Set(done.map((o) => o.window.def))].map((def) => ({
      def,
      stagedFiles: done.filter((o) => o.window.def === def && o.stage && o.stage.rows > 0).map((o) => o.stage!.file),
    }));
    let report!: RunReport;
    await commitRun({
      engine,
      paths,
      runId,
      ingestedAt,
      stagingDir: staging,
      network: job.network,
      datasets,
      rejectFiles: done.filter((o) => o.rejectStage).map((o) => o.rejectStage!.file),
      windows: outcomes.map((o) => windowRecord(runId, o)),
      watermarks: done
        .filter((o) => o.window.range)
        .map((o) => ({ network: o.window.network, dataset: o.window.def.name, scope: o.window.scopeKey, block: o.window.range!.to })),
      viewDefs: [...new Set(job.datasets.map((d) => getDataset(d.name)))],
      run: (files) => {
        report = buildReport(job, runId, started, now(), head, outcomes, files, transformers, paths);
        return { job: job.name, startedAt: ingestedAt, finishedAt: report.finishedAt, status: report.status, report };
      },
    });
    return report;
  } finally {
    engine.close();
    await transport.close();
    await targets.close();
    await closeRunStaging(staging);
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
  for (const f of files) {
    const r = per.get(f.dataset);
    if (!r) continue;
    r.files++;
    r.bytes += f.bytes;
  }
  const datasets = [...per.values()];
  const totals = sumReports(datasets);
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
    datasets,
    totals,
    errors: failed.map((o) => ({ window: o.window.id, error: o.error! })),
    unknownFields,
    lake: paths.root,
  };
}
