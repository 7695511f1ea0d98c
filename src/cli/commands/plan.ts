import type { CommandModule } from 'yargs';
import { checkCatalogUrl, connect } from '../../distributed/control-plane.js';
import { runToTakeUp } from '../../distributed/enqueue.js';
import { controlPlanLedger, DEFAULT_ACCOUNT, hasLedger } from '../../distributed/plan-ledger.js';
import { redactUrl } from '../../distributed/url.js';
import { voidedText } from '../../load/ledger/voided.js';
import { estimatePlan, type PlanEstimate } from '../../pipeline/estimate.js';
import { loadJobDocument, type Job } from '../../pipeline/job.js';
import { blockRangeArgs, lakeNamedBy, runOverrides, withBlockRangeOptions, withTargetOptions, type RunArgs } from '../common.js';
import { CliError } from '../exit-codes.js';
import { resolveLakeTarget, type LakeTarget } from '../lake-target.js';

interface Args extends RunArgs {
  job: string;
  catalog?: string;
  account: string;
  'from-block'?: number;
  'to-block'?: number;
  head?: number;
  probe: boolean;
  format: 'text' | 'json';
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

/** What a full `chainlake verify` of the lake's windows would cost: verify --plan's figure. */
function verifyLine(p: PlanEstimate): string {
  const v = p.verify;
  if (v.windows === 0) return 'verify: the lake holds no committed window of this job yet';
  return `verify: a full \`chainlake verify\` of the ${v.windows} committed windows would send ${v.requests} requests if every window holds (one per scope's run of consecutive windows; a differing one costs about two per halving)${
    v.notCheckable ? `; ${v.notCheckable} of them cannot be checked by count` : ''
  }; they count against the daily quota`;
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
    ...p.voided.map((v) => `warning: ${voidedText(v, p.network)}`),
    ...table,
    ...windowLines(p),
    `${p.windows.length} windows to fetch${p.skipped ? `, ${p.skipped} already in the lake` : ''}${p.kept ? `, ${p.kept} kept by a failed run (committed without sending their requests again)` : ''}`,
    `estimated requests: ${p.estimatedRequests}${p.blockTimeRequests ? ` (${p.blockTimeRequests} of them block times, for windows fetched again whose rows carry no block number)` : ''}; duration: ${minutes >= 1 ? `${minutes.toFixed(1)} min` : `${p.estimatedSeconds.toFixed(1)} s`} (${basisText(p)})`,
    p.quotaShare !== null
      ? `daily quota: ${(p.quotaShare * 100).toFixed(2)} % of ${p.dailyRequestQuota} requests/day; ${p.quotaLeftToday} left today (UTC)`
      : 'daily quota: none configured (set "dailyRequestQuota" in the job)',
    ...(p.quotaLeftToday !== null && p.estimatedRequests > p.quotaLeftToday
      ? [
          `warning: the plan needs ${p.estimatedRequests} requests and ${p.quotaLeftToday} are left today: the run will stop at the quota (exit 4) and the next one resumes`,
        ]
      : []),
    verifyLine(p),
    `made ${p.probeRequests} requests to plan (the head${p.windows.some((w) => w.rows !== null) ? ' and one count probe per paged window' : ''}); fetched no data`,
  ].join('\n');
}

/** Flags that change what a run fetches, which `enqueue` has not: a plan of a distributed lake refuses them. */
const LOCAL_ONLY_FLAGS = ['from-block', 'to-block', 'head', 'full-refresh', 'window-blocks'] as const;

export async function printPlan(
  job: Job,
  args: RunArgs & { probe?: boolean; format?: 'text' | 'json' },
  rangeOverride?: { fromBlock?: number; toBlock?: number; head?: number },
): Promise<void> {
  const plan = await estimatePlan(job, { rangeOverride, probe: args.probe ?? true, fullRefresh: args['full-refresh'] });
  process.stdout.write((args.format === 'json' ? JSON.stringify(plan, null, 2) : formatPlan(plan)) + '\n');
}

/**
 * The plan of a job on a distributed lake: the windows `chainlake enqueue` would queue now (the same planner, on
 * the control plane's ledger), or, when enqueue would take up an unfinished run instead, that run.
 */
async function printDistributedPlan(job: Job, args: Args, target: Extract<LakeTarget, { kind: 'distributed' }>): Promise<void> {
  const given = LOCAL_ONLY_FLAGS.filter((f) => args[f] !== undefined && args[f] !== false);
  if (given.length > 0)
    throw new CliError(
      `--${given[0]} changes what a run fetches, and \`chainlake enqueue\` has no such flag: the plan of the distributed lake ${redactUrl(target.catalog)} lists what enqueue would queue`,
      'CHAINLAKE_USAGE',
      `drop --${given[0]}, or plan a local lake with --lake DIR`,
    );
  const url = checkCatalogUrl(target.catalog);
  const client = await connect(url);
  try {
    const ledger = await hasLedger(client);
    const open = ledger ? await runToTakeUp(client, job, false) : undefined;
    if (open) {
      const text = `plan for ${job.name} on ${job.what.network} into the lake ${redactUrl(url)}: run ${open.runId} is not finished; \`chainlake enqueue\` would take it up again (its failed or lost windows offered again) and plan nothing new`;
      process.stdout.write(
        (args.format === 'json'
          ? JSON.stringify({ job: job.name, network: job.what.network, lake: redactUrl(url), takesUp: open.runId, head: open.head }, null, 2)
          : text) + '\n',
      );
      return;
    }
    const plan = await estimatePlan(job, {
      probe: args.probe,
      ledger: controlPlanLedger(client, url, args.account),
      verifyTarget: ledger
        ? { kind: 'distributed', catalog: url, ...(target.store ? { store: target.store } : {}), storeConnection: target.storeConnection }
        : null,
    });
    process.stdout.write((args.format === 'json' ? JSON.stringify(plan, null, 2) : formatPlan(plan)) + '\n');
  } finally {
    await client.end().catch(() => undefined);
  }
}

export const planCommand: CommandModule<object, Args> = {
  command: 'plan <job>',
  describe: 'Show what a run (or, with --catalog, `enqueue`) would fetch — windows, rows, requests, duration, quota share — without fetching data',
  builder: (y) =>
    withBlockRangeOptions(withTargetOptions(y.positional('job', { type: 'string', demandOption: true, describe: 'Path to the job file (JSON)' })))
      .option('catalog', {
        type: 'string',
        defaultDescription: '$CHAINLAKE_CATALOG',
        describe: "A distributed lake's control plane (postgres://user@host/db): list the windows `chainlake enqueue` would queue there",
      })
      .option('account', {
        type: 'string',
        default: process.env.CHAINLAKE_ACCOUNT || DEFAULT_ACCOUNT,
        defaultDescription: '$CHAINLAKE_ACCOUNT or default',
        describe: 'With --catalog: the API account (`chainlake worker --account`) whose daily quota left is shown',
      })
      .option('probe', { type: 'boolean', default: true, describe: 'Ask each paged window for its row count (one small request each); --no-probe to skip' })
      .option('format', { choices: ['text', 'json'] as const, default: 'text' as const })
      .example('$0 plan jobs/nightly.example.json', "What tonight's run would fetch, at the job's rps")
      .example('$0 plan jobs/testnet.example.json --no-probe --format json', 'Windows only, no count probes, as JSON')
      .example('$0 plan jobs/nightly.example.json --catalog postgres://chainlake@db/lake', 'What `chainlake enqueue` would queue for the workers'),
  handler: async (args) => {
    const { job, doc } = await loadJobDocument(args.job, process.env, (doc) => runOverrides(args, lakeNamedBy(doc)));
    const target = resolveLakeTarget({ lake: args.lake, catalog: args.catalog }, { jobLake: lakeNamedBy(doc) });
    if (target.kind === 'distributed') await printDistributedPlan(job, args, target);
    else await printPlan(job, args, blockRangeArgs(args));
  },
};
