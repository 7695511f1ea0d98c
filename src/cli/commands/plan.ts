import { rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';
import pLimit from 'p-limit';
import type { CommandModule } from 'yargs';
import { Accounting } from '../../extract/accounting.js';
import { openEngine } from '../../load/engine.js';
import { LakePaths } from '../../load/paths.js';
import { fetcherFor } from '../../pipeline/execute.js';
import { loadJobDocument, type Job } from '../../pipeline/job.js';
import { effectiveJob, windowsToFetch } from '../../pipeline/prepare.js';
import { openSource, type SourceOptions } from '../../pipeline/source.js';
import { isProvisional, requestsForRows, type Window } from '../../pipeline/plan.js';
import { quotaAccount } from '../../extract/quota.js';
import { readRequestUsage } from '../../load/state.js';
import { blockRangeArgs, lakeNamedBy, runOverrides, withBlockRangeOptions, withTargetOptions, type RunArgs } from '../common.js';
import { makeScratch } from '../../pipeline/scratch.js';

interface Args extends RunArgs {
  job: string;
  'from-block'?: number;
  'to-block'?: number;
  head?: number;
  probe: boolean;
  format: 'text' | 'json';
}

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
  windows: WindowEstimate[];
  skipped: number;
  /** Requests spent to make this plan (the head, and one count probe per paged window). */
  probeRequests: number;
  estimatedRequests: number;
  estimatedSeconds: number;
  /**
   * What the duration is estimated from: the seconds per request the job's last complete run took on this
   * lake (commits, pages of full size and the API's real latency included), else the probes' latency.
   */
  durationBasis: { kind: 'last-run'; runId: string; requests: number; seconds: number } | { kind: 'probe'; meanLatencyMs: number; concurrency: number };
  /** The lake the run would write (absolute). */
  lake: string;
  rps: number | null;
  dailyRequestQuota: number | null;
  quotaShare: number | null;
  /** Requests of the daily quota left today (UTC), after what the lake's catalog says runs spent today. */
  quotaLeftToday: number | null;
}

/** Requests a window needs for `rows` rows: the run's rule (requestsForRows). */
function requestsFor(w: Window, rows: number | null, job: Job): number {
  if (rows === null) return 1;
  return requestsForRows(rows, { paged: w.endpoint.paging.kind === 'offset', ranged: w.range !== undefined }, job.source, job.what.range);
}

/** Requests and seconds of the job's last complete run on this lake (at least 20 requests), or undefined. */
async function lastRun(paths: LakePaths, job: Job): Promise<{ runId: string; requests: number; seconds: number } | undefined> {
  if (!existsSync(paths.catalog)) return undefined;
  try {
    const instance = await DuckDBInstance.create(paths.catalog, { access_mode: 'READ_ONLY' });
    try {
      const conn = await instance.connect();
      try {
        const row = (
          await conn.runAndReadAll(
            `SELECT run_id, CAST(json_extract(report, '$.totals.requests') AS BIGINT), CAST(json_extract(report, '$.durationMs') AS BIGINT) FROM runs
             WHERE job = $job AND status = 'complete' AND json_extract_string(report, '$.network') = $network
               AND CAST(json_extract(report, '$.totals.requests') AS BIGINT) >= 20
             ORDER BY started_at DESC LIMIT 1`,
            { job: job.name, network: job.what.network },
          )
        ).getRowsJS()[0];
        return row ? { runId: String(row[0]), requests: Number(row[1]), seconds: Number(row[2]) / 1000 } : undefined;
      } finally {
        conn.closeSync();
      }
    } finally {
      instance.closeSync();
    }
  } catch {
    return undefined; // a plan never fails for its estimate: it falls back to the probes
  }
}

/** Plans a job against the live API without fetching data: windows, counts, requests, duration. */
export async function estimatePlan(
  baseJob: Job,
  opts: { rangeOverride?: { fromBlock?: number; toBlock?: number; head?: number }; probe: boolean; fullRefresh?: boolean } & Pick<
    SourceOptions,
    'simulator' | 'transport'
  >,
): Promise<PlanEstimate> {
  const job = effectiveJob(baseJob, opts.rangeOverride);
  const work = await makeScratch('plan');
  const source = await openSource(job.source, { simulator: opts.simulator, transport: opts.transport });
  const { clients } = source;
  const engine = await openEngine({ tempDir: work });
  const acct = new Accounting();
  try {
    // The run's own step: the windows below are the ones `run` would fetch now, not an estimate of them.
    const prepared = await windowsToFetch({ baseJob, job, fullRefresh: opts.fullRefresh ?? false }, engine, new LakePaths(job.lake.dir), clients, acct);
    const limit = pLimit(job.source.concurrency);
    const windows = await Promise.all(
      prepared.windows.map((w) =>
        limit(async (): Promise<WindowEstimate> => {
          let rows: number | null = null;
          if (opts.probe && w.endpoint.paging.kind === 'offset') rows = (await fetcherFor(w, clients)({ offset: 0, limit: 1, range: w.range }, acct)).count;
          return {
            window: w.id,
            dataset: w.def.name,
            scope: w.scopeKey,
            fromBlock: w.range?.from ?? null,
            toBlock: w.range?.to ?? null,
            provisional: isProvisional(w),
            rows,
            requests: requestsFor(w, rows, job),
          };
        }),
      ),
    );
    const estimatedRequests = windows.reduce((a, w) => a + w.requests, 0);
    const usedToday = job.source.dailyRequestQuota
      ? ((await readRequestUsage(engine, new LakePaths(job.lake.dir), quotaAccount(job.source.target))).get(new Date().toISOString().slice(0, 10)) ?? 0)
      : 0;
    const paths = new LakePaths(job.lake.dir);
    const last = await lastRun(paths, job);
    const meanLatencyMs = acct.requests > 0 ? acct.latencyMeanMs : 200;
    // Requests in flight at once: the concurrency (a window's pages prefetch, so even one window fills it).
    const inFlight = job.source.concurrency;
    const fromLatency = (estimatedRequests * meanLatencyMs) / 1000 / inFlight;
    const paced = last ? estimatedRequests * (last.seconds / last.requests) : fromLatency;
    // The rps limit is a floor under any of these, never the estimate by itself: when the API's latency over
    // the requests in flight is slower than the limit, the API is the bound.
    const estimatedSeconds = Math.max(paced, job.source.rps ? estimatedRequests / job.source.rps : 0);
    return {
      job: job.name,
      network: job.what.network,
      head: prepared.head,
      range: prepared.range,
      windowBlocks: job.what.range.windowBlocks,
      finalBlock: prepared.head !== null && job.what.range.finalityDepth > 0 ? prepared.head - job.what.range.finalityDepth : null,
      resumeOf: prepared.resume?.runId ?? null,
      windows,
      skipped: prepared.skipped,
      probeRequests: acct.requests,
      estimatedRequests,
      estimatedSeconds,
      durationBasis: last ? { kind: 'last-run', ...last } : { kind: 'probe', meanLatencyMs: Math.round(meanLatencyMs), concurrency: inFlight },
      lake: paths.root,
      rps: job.source.rps ?? null,
      dailyRequestQuota: job.source.dailyRequestQuota ?? null,
      quotaShare: job.source.dailyRequestQuota ? estimatedRequests / job.source.dailyRequestQuota : null,
      quotaLeftToday: job.source.dailyRequestQuota ? Math.max(0, job.source.dailyRequestQuota - usedToday) : null,
    };
  } finally {
    engine.close();
    await source.close();
    await rm(work, { recursive: true, force: true });
  }
}

function basisText(p: PlanEstimate): string {
  const b = p.durationBasis;
  const basis =
    b.kind === 'last-run'
      ? `at the pace of the last run, ${b.runId}: ${b.requests} requests in ${b.seconds.toFixed(1)} s`
      : `from the probes' mean latency of ${b.meanLatencyMs} ms with ${b.concurrency} requests in flight; a run of this job makes it more accurate`;
  return p.rps && p.estimatedSeconds === p.estimatedRequests / p.rps ? `limited by --rps ${p.rps}; ${basis}` : basis;
}

/** Windows listed one per line in the text output; `--format json` lists every one. */
const LISTED_WINDOWS = 40;

/** The windows, one per line with their range and whether they are provisional, as the run's ledger will hold them. */
function windowLines(p: PlanEstimate): string[] {
  if (p.windows.length === 0) return [];
  const rows = p.windows
    .slice(0, LISTED_WINDOWS)
    .map((w) => [
      w.dataset,
      w.scope,
      w.fromBlock === null ? 'snapshot' : `blocks ${w.fromBlock}-${w.toBlock}`,
      w.provisional ? 'provisional' : '',
      w.rows === null ? '' : `${w.rows} rows`,
      `${w.requests} req`,
    ]);
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const more = p.windows.length - rows.length;
  return [
    'windows (the pager may cut a dense one into several as it fetches):',
    ...rows.map((r) => `  ${r.map((c, i) => c.padEnd(widths[i]!)).join('  ')}`.trimEnd()),
    ...(more > 0 ? [`  ... and ${more} more (--format json lists every window)`] : []),
  ];
}

export function formatPlan(p: PlanEstimate): string {
  const per = new Map<string, { windows: number; rows: number | null; requests: number }>();
  for (const w of p.windows) {
    const d = per.get(w.dataset) ?? { windows: 0, rows: 0, requests: 0 };
    d.windows++;
    d.rows = d.rows === null || w.rows === null ? null : d.rows + w.rows;
    d.requests += w.requests;
    per.set(w.dataset, d);
  }
  const rows = [
    ['dataset', 'windows', 'rows', 'requests'],
    ...[...per].map(([n, d]) => [n, String(d.windows), d.rows === null ? '?' : String(d.rows), String(d.requests)]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const table = rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '));
  const minutes = p.estimatedSeconds / 60;
  return [
    `plan for ${p.job} on ${p.network} into the lake ${p.lake}: head ${p.head ?? 'not needed'}${p.resumeOf ? ` (resuming run ${p.resumeOf})` : ''}, blocks ${p.range.from}-${p.range.to} in chunks of ${p.windowBlocks} (joined where they touch)${p.finalBlock !== null ? `; blocks above ${p.finalBlock} are not final (provisional windows, fetched again by the next run)` : ''}`,
    ...table,
    ...windowLines(p),
    `${p.windows.length} windows to fetch${p.skipped ? `, ${p.skipped} already in the lake` : ''}`,
    `estimated requests: ${p.estimatedRequests}; duration: ${minutes >= 1 ? `${minutes.toFixed(1)} min` : `${p.estimatedSeconds.toFixed(1)} s`} (${basisText(p)})`,
    p.quotaShare !== null
      ? `daily quota: ${(p.quotaShare * 100).toFixed(2)} % of ${p.dailyRequestQuota} requests/day; ${p.quotaLeftToday} left today (UTC)`
      : 'daily quota: none configured (set "dailyRequestQuota" in the job)',
    ...(p.quotaLeftToday !== null && p.estimatedRequests > p.quotaLeftToday
      ? [
          `warning: the plan needs ${p.estimatedRequests} requests and ${p.quotaLeftToday} are left today: the run will stop at the quota (exit 4) and the next one resumes`,
        ]
      : []),
    `made ${p.probeRequests} requests to plan (the head${p.windows.some((w) => w.rows !== null) ? ' and one count probe per paged window' : ''}); fetched no data`,
  ].join('\n');
}

export async function printPlan(
  job: Job,
  args: RunArgs & { probe?: boolean; format?: 'text' | 'json' },
  rangeOverride?: { fromBlock?: number; toBlock?: number; head?: number },
): Promise<void> {
  const plan = await estimatePlan(job, { rangeOverride, probe: args.probe ?? true, fullRefresh: args['full-refresh'] });
  process.stdout.write((args.format === 'json' ? JSON.stringify(plan, null, 2) : formatPlan(plan)) + '\n');
}

export const planCommand: CommandModule<object, Args> = {
  command: 'plan <job>',
  describe: 'Show what a run would fetch — windows, rows, requests, duration, quota share — without fetching data',
  builder: (y) =>
    withBlockRangeOptions(withTargetOptions(y.positional('job', { type: 'string', demandOption: true, describe: 'Path to the job file (JSON)' })))
      .option('probe', { type: 'boolean', default: true, describe: 'Ask each paged window for its row count (one small request each); --no-probe to skip' })
      .option('format', { choices: ['text', 'json'] as const, default: 'text' as const })
      .example('$0 plan jobs/nightly.example.json', "What tonight's run would fetch, at the job's rps")
      .example('$0 plan jobs/testnet.example.json --no-probe --format json', 'Windows only, no count probes, as JSON'),
  handler: async (args) => {
    const { job } = await loadJobDocument(args.job, process.env, (doc) => runOverrides(args, lakeNamedBy(doc)));
    await printPlan(job, args, blockRangeArgs(args));
  },
};
