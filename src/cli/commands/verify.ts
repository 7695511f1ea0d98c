import type { CommandModule } from 'yargs';
import type { VerificationRow } from '../../load/ledger/verifications.js';
import { loadJobDocument } from '../../pipeline/job.js';
import type { VerifySession, VerifyTarget } from '../../pipeline/verify/session.js';
import { blockRangeArgs, lakeNamedBy, outputFor, shownFlagValue, type OutputArgs } from '../common.js';
import { CliError, EXIT } from '../exit-codes.js';
import { resolveLakeTarget, withLakeOptions } from '../lake-target.js';
import { renderRows } from '../output.js';

interface Args extends OutputArgs {
  job: string;
  lake?: string;
  catalog?: string;
  store?: string;
  dataset?: string[];
  scope?: string[];
  'from-block'?: number;
  'to-block'?: number;
  since?: string;
  until?: string;
  sample?: number;
  format: 'text' | 'json';
  repair?: boolean;
  plan?: boolean;
  account?: string;
}

/** `--since`/`--until`: a block number, or a UTC day (YYYY-MM-DD); undefined when not given. */
function blockOrDay(flag: 'since' | 'until', value: string | undefined): { block: number } | { day: string } | undefined {
  if (value === undefined) return undefined;
  const text = String(value).trim();
  if (/^\d+$/.test(text) && Number.isSafeInteger(Number(text))) return { block: Number(text) };
  const d = /^\d{4}-\d{2}-\d{2}$/.test(text) ? new Date(`${text}T00:00:00Z`) : undefined;
  if (d && !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === text) return { day: text };
  throw new CliError(`--${flag} must be a block number or a UTC day (YYYY-MM-DD), got ${JSON.stringify(value)}`);
}

const CHECKS: Record<string, string> = {
  count: "window counts against the API (a one-entry page's count for the scope and range)",
  range_filter: 'the API lists only rows of the block range asked',
  gaps: "gaps between a scope's committed windows",
  rows_in_windows: 'every row inside a committed window of its scope',
  duplicate_keys: 'one row per natural key',
  nonces: "an account's sent transactions without nonce holes (whole history held)",
  decoded_rows: 'decoded rows one-to-one with their logs',
};

/** The text output: one table per check, then the totals. */
export function formatVerify(s: VerifySession): string {
  const parts: string[] = [];
  const byCheck = new Map<string, VerificationRow[]>();
  for (const r of s.rows) byCheck.set(r.check, [...(byCheck.get(r.check) ?? []), r]);
  for (const [check, rows] of byCheck) {
    const held = rows.filter((r) => r.status === 'held').length;
    const differs = rows.filter((r) => r.status === 'differs').length;
    const not = rows.length - held - differs;
    // Held windows are summed up; what differs or could not be checked is listed.
    const listed = rows.filter((r) => r.status !== 'held');
    const head = `${check}: ${CHECKS[check] ?? check}: ${held} held, ${differs} differ, ${not} not checked`;
    if (listed.length === 0) {
      parts.push(head);
      continue;
    }
    const columns = ['status', 'dataset', 'scope', 'from_block', 'to_block', 'lake', 'api', 'detail'];
    parts.push(
      `${head}\n${renderRows(
        columns,
        listed.map((r) => [r.status, r.dataset, r.scope, r.fromBlock, r.toBlock, r.lakeCount, r.apiCount, r.detail]),
        'table',
      )}`,
    );
  }
  parts.push(`requests: ${s.requests} (the export of these windows took ${s.exportRequests}); verify ${s.verifyId} recorded in the verifications table`);
  if (s.repair && s.beforeRepair)
    parts.unshift(
      `before the repair (verify ${s.beforeRepair.verifyId}, ${s.beforeRepair.requests} requests): ${s.beforeRepair.differing.length} windows differed: ${s.beforeRepair.differing.map((w) => w.id).join(', ')}`,
      `repair: run ${s.repair.runId} fetched exactly those windows again (${s.repair.requests} requests): ${s.repair.status}${s.repair.snapshots ? `, committed in snapshot ${s.repair.snapshots.join(', ')}` : ''}; verified again:`,
    );
  if (s.quotaReached)
    parts.push(
      `STOPPED at the daily request quota (${s.quotaReached.limit}): the windows it could not ask are not checked; exit ${EXIT.quotaReached} unless something differs`,
    );
  parts.push(
    s.holds
      ? 'everything checked holds'
      : `DIFFERS: exit ${EXIT.differs}${s.repair ? ' (after the repair)' : s.differing.length ? '; chainlake verify --repair fetches the differing windows again' : ''}`,
  );
  return parts.join('\n\n');
}

export const verifyCommand: CommandModule<object, Args> = {
  command: 'verify <job>',
  describe: "Check a job's committed windows against the API (counts) and the lake against itself; --repair fetches what differs again",
  builder: (y) =>
    withLakeOptions(y.positional('job', { type: 'string', demandOption: true, describe: 'The job file whose lake and API are checked' }), { distributed: true })
      .option('dataset', { type: 'string', array: true, describe: 'Only these datasets' })
      .option('scope', { type: 'string', array: true, describe: 'Only these scopes (an address, or a scope key like address=0x…)' })
      .option('from-block', { type: 'number', describe: 'Only windows that reach this block or later' })
      .option('to-block', { type: 'number', describe: 'Only windows that start at this block or earlier' })
      .option('since', { type: 'string', describe: 'Only windows reaching this block, or this UTC day (YYYY-MM-DD), or later' })
      .option('until', { type: 'string', describe: 'Only windows reaching this block, or this UTC day (YYYY-MM-DD), or earlier' })
      .option('sample', { type: 'number', describe: 'Check this many windows, spread evenly, instead of all' })
      .option('format', { choices: ['text', 'json'] as const, default: 'text' as const, describe: 'text for a person, json for a program' })
      .option('repair', {
        type: 'boolean',
        describe:
          'Fetch the windows whose count differs again and commit them as one snapshot (a distributed lake: as a run of their own, worked by this process)',
      })
      .option('plan', { type: 'boolean', describe: 'Print the requests a verify would send, and send none' })
      .option('account', {
        type: 'string',
        defaultDescription: '$CHAINLAKE_ACCOUNT or default',
        describe:
          "A distributed lake: the API account whose key verify sends (as `chainlake worker --account`); its requests count against that account's dailyRequestQuota, and --repair's enqueue and worker use it",
      })
      .example('$0 verify jobs/demo.json', 'Every committed window of the demo lake, against the simulator')
      .example('$0 verify jobs/demo.json --dataset transactions --sample 50 --format json', 'A sample of 50 windows, as JSON')
      .example('$0 verify jobs/demo.json --since 2024-03-01 --until 2024-03-31', 'The windows reaching blocks of March 2024')
      .example('$0 verify jobs/demo.json --repair', 'Fetch what differs again; verify again to see it hold'),
  handler: async (args) => {
    const sample = args.sample;
    if (sample !== undefined && (!Number.isSafeInteger(sample) || sample < 1))
      throw new CliError(`--sample must be a positive integer, got ${shownFlagValue('sample', sample)}`);
    const range = blockRangeArgs(args);
    // The lake by the lake-choice rule: a local one is the job's lake at resolution (the repair writes it).
    const lakeOf = (doc: unknown): ReturnType<typeof resolveLakeTarget> => resolveLakeTarget(args, { jobLake: lakeNamedBy(doc) });
    const { job, doc } = await loadJobDocument(args.job, process.env, (d) => {
      const chosen = lakeOf(d);
      return chosen.kind === 'local' ? { lake: chosen.lake } : {};
    });
    const t = lakeOf(doc);
    const target: VerifyTarget =
      t.kind === 'local' ? { kind: 'local', lake: t.lake } : { kind: 'distributed', catalog: t.catalog, store: t.store, storeConnection: t.storeConnection };
    if (args.repair && args.plan) throw new CliError('--repair and --plan do not go together: --plan sends nothing');
    if (args.account !== undefined && target.kind === 'local')
      throw new CliError(`--account names an account of a distributed lake; ${target.lake} is a local lake, whose requests count against the explorer's URL`);
    const account = target.kind === 'distributed' ? args.account || process.env.CHAINLAKE_ACCOUNT || undefined : undefined;
    const since = blockOrDay('since', args.since);
    const until = blockOrDay('until', args.until);
    if (since && range?.fromBlock !== undefined) throw new CliError('--since and --from-block both name the start: give one');
    if (until && range?.toBlock !== undefined) throw new CliError('--until and --to-block both name the end: give one');
    const sel = {
      datasets: args.dataset,
      scopes: args.scope,
      fromBlock: since && 'block' in since ? since.block : range?.fromBlock,
      toBlock: until && 'block' in until ? until.block : range?.toBlock,
      ...(since && 'day' in since ? { since: since.day } : {}),
      ...(until && 'day' in until ? { until: until.day } : {}),
      sample,
    };
    const { planVerifySession, verifySession } = await import('../../pipeline/verify/session.js');
    if (args.plan) {
      const p = await planVerifySession(job, target, sel);
      process.stdout.write(
        args.format === 'json'
          ? JSON.stringify(p) + '\n'
          : `windows: ${p.windows} (${p.notCheckable} whose count cannot be checked)\nrequests: ${p.requests} if every window holds (one per scope's run of consecutive windows; a differing one costs about two per halving); the export of these windows took ${p.exportRequests}\n`,
      );
      return;
    }
    const { logger } = outputFor(args);
    const s = await verifySession(job, target, sel, { repair: args.repair, logger, doc, env: process.env, ...(account ? { account } : {}) });
    process.stdout.write(
      (args.format === 'json'
        ? JSON.stringify(
            {
              ...s,
              differing: s.differing.map((w) => w.id),
              beforeRepair: s.beforeRepair && { ...s.beforeRepair, differing: s.beforeRepair.differing.map((w) => w.id) },
            },
            null,
            2,
          )
        : formatVerify(s)) + '\n',
    );
    // What differs outweighs a stop at the quota: both are said, the exit code names the difference.
    if (!s.holds) process.exitCode = EXIT.differs;
    else if (s.quotaReached) process.exitCode = EXIT.quotaReached;
  },
};
