import { access, constants, stat, writeFile } from 'node:fs/promises';
import { REFUSED_HINT, UNREACHABLE_HINT } from '../extract/errors.js';
import { SETUP_CODES } from '../errors.js';
import path from 'node:path';
import type { Argv } from 'yargs';
import type { Job, JobOverrides } from '../pipeline/job.js';
import { RANGE_OPTIONS, TOP_OPTIONS, type JobOption } from '../pipeline/job-options.js';
import { createLogger, type Level, type Logger } from '../pipeline/log.js';
import { formatReport, type RunReport } from '../pipeline/report.js';
import type { RunOptions } from '../pipeline/run.js';
import { CliError, EXIT } from './exit-codes.js';
import { TerminalProgress } from './progress.js';
import { DEFAULT_LAKE, LAKE_ENV, resolveLakeTarget } from './lake-target.js';

/**
 * The local lake of a command that only writes a local lake (run, export, plan): the lake-choice rule
 * (lake-target.ts) without the distributed settings, which these commands never read.
 */
export function localLakeOf(flagLake: string | undefined, jobLake: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  const t = resolveLakeTarget({ lake: flagLake }, { jobLake, env: { [LAKE_ENV]: env[LAKE_ENV] } });
  return t.kind === 'local' ? t.lake : DEFAULT_LAKE;
}

export interface OutputArgs {
  'log-format'?: 'text' | 'json';
  quiet?: boolean;
  verbose?: boolean;
}

export interface RunArgs extends OutputArgs {
  lake?: string;
  concurrency?: number;
  rps?: number;
  strict?: boolean;
  report?: string;
  'full-refresh'?: boolean;
  wait?: boolean;
  'window-blocks'?: number;
  'finality-depth'?: number;
}

/** Flags that say where and how politely a job runs: `plan` estimates with them, `run`/`export` use them. */
export function withTargetOptions<T>(y: Argv<T>) {
  return y
    .option('lake', { type: 'string', describe: `Lake directory (overrides the job; default: the job's lake, else $${LAKE_ENV}, else ${DEFAULT_LAKE})` })
    .option('concurrency', { type: 'number', describe: 'Requests in flight at once (overrides the job)' })
    .option('rps', { type: 'number', describe: 'Requests per second across the run (overrides the job)' })
    .option('full-refresh', { type: 'boolean', describe: 'Ignore watermarks and unfinished runs: fetch the whole range again' })
    .option('window-blocks', {
      type: 'number',
      describe: "Blocks per window chunk, fetched in block order (overrides the job's range.windowBlocks; default 100000)",
    })
    .option('finality-depth', finalityDepthOption);
}

/** `--finality-depth` (run, plan, export, enqueue): blocks below the head not yet final. */
export const finalityDepthOption = {
  type: 'number',
  describe:
    "Blocks below the head that may still change: windows above head - N are provisional, fetched again and replaced by the next run (overrides the job's range.finalityDepth; default 64 on a real mainnet or testnet, 0 on the simulator; 0: the head is final)",
} as const;

/** `--finality-depth` as an override of the job's (a usage error when it is not a block count). */
export function finalityDepthOverride(depth: number | undefined): JobOverrides {
  if (depth === undefined) return {};
  const { min, max } = RANGE_OPTIONS.finalityDepth;
  if (!Number.isSafeInteger(depth) || depth < min || depth > max!)
    throw new CliError(`--finality-depth must be an integer from ${min} to ${max!}, got ${shownFlagValue('finality-depth', depth)}`);
  return { finalityDepth: depth };
}

/** `--from-block/--to-block` of a job file command: an explicit range for this run only. */
export function withBlockRangeOptions<T>(y: Argv<T>) {
  return y
    .option('from-block', { type: 'number', describe: 'First block, for this run only (an explicit range: no resume, no incremental)' })
    .option('to-block', { type: 'number', describe: 'Last block, for this run only' })
    .option('head', { type: 'number', describe: 'The chain head, as you know it: nothing is asked to find it (for services without blocks/latest)' });
}

/**
 * Where a distributed lake is (enqueue, worker): its control plane and its store. No yargs defaults: the
 * environment fills what no flag says (lake-target.ts), so that a flag can be told from an exported variable.
 */
export function withDistributedOptions<T>(y: Argv<T>) {
  return y
    .option('catalog', {
      type: 'string',
      defaultDescription: '$CHAINLAKE_CATALOG',
      describe: 'PostgreSQL URL of the control plane (postgres://user@host/db; the password from PGPASSWORD or ~/.pgpass)',
    })
    .option('store', {
      type: 'string',
      defaultDescription: '$CHAINLAKE_STORE',
      describe: "Where the lake's files live, as this machine reaches them: a shared directory or s3://bucket/prefix",
    });
}

/** Flags shared by every command that runs a job (run, export). */
export function withRunOptions<T>(y: Argv<T>) {
  return withTargetOptions(y)
    .option('strict', { type: 'boolean', describe: 'Fail the run (exit 3) if any row does not convert' })
    .option('wait', { type: 'boolean', describe: 'If another run holds the lake, wait for it instead of exiting 75' })
    .option('report', { type: 'string', describe: 'Also write the run report as JSON to this file (- for stdout: the text report then goes to stderr)' })
    .middleware((a) => {
      // yargs leaves a lone `-` (the usual name of stdout) out of the option it follows: `--report -` arrives as
      // an empty --report and a stray positional.
      const dash = a._.indexOf('-');
      if (a.report === '' && dash >= 0) {
        (a as { report?: string }).report = '-';
        a._.splice(dash, 1);
      }
    }, true);
}

/**
 * A number flag's value as the user typed it: yargs turns `--concurrency abc` into NaN, and "got NaN" says
 * nothing about what was wrong.
 */
export function shownFlagValue(name: string, parsed: number, argv: readonly string[] = process.argv): string {
  if (!Number.isNaN(parsed)) return String(parsed);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a.startsWith(`--${name}=`)) return JSON.stringify(a.slice(name.length + 3));
    if (a === `--${name}` && i + 1 < argv.length) return JSON.stringify(argv[i + 1]);
  }
  return 'a value that is not a number';
}

/** `--report FILE` must be writable before the run starts: a run that fetched for an hour should not fail on it. */
async function checkReportPath(file: string): Promise<void> {
  const dir = path.dirname(path.resolve(file));
  const problem = await stat(dir).then(
    (s) =>
      s.isDirectory()
        ? access(dir, constants.W_OK).then(
            () => undefined,
            () => 'is not writable',
          )
        : 'is not a directory',
    () => 'does not exist',
  );
  if (problem) throw new CliError(`--report ${file}: the folder ${dir} ${problem}; create it or give --report another path`);
}

/** True when a job document names its lake (`"lake": …`): the file's choice then comes before $CHAINLAKE_LAKE. */
export function jobNamesLake(doc: unknown): boolean {
  return typeof doc === 'object' && doc !== null && 'lake' in doc && (doc as { lake?: unknown }).lake !== undefined;
}

/** The lake a job document names (`"lake": …`), or undefined: the file's choice then comes before $CHAINLAKE_LAKE. */
export function lakeNamedBy(doc: unknown): string | undefined {
  const lake = jobNamesLake(doc) ? (doc as { lake: unknown }).lake : undefined;
  return typeof lake === 'string' ? lake : undefined;
}

/**
 * The flags' values over the job's, checked, as the overrides the job is resolved with (parseJob): a flag is
 * applied once, there, never to a resolved job. `jobLake`: the lake the job file names (lakeNamedBy), which
 * comes before $CHAINLAKE_LAKE; else --lake, then $CHAINLAKE_LAKE, then data/lake choose it (lake-target.ts).
 */
export function runOverrides(args: RunArgs, jobLake: string | undefined): JobOverrides {
  // A bad flag is a usage error (exit 2), with the bounds a job file has for the same setting.
  const positive = (name: string, v: number | undefined, o: JobOption): number | undefined => {
    if (v === undefined || o.kind !== 'int') return undefined;
    const max = o.max ?? Number.MAX_SAFE_INTEGER;
    if (!Number.isInteger(v) || v < o.min || v > max)
      throw new CliError(`--${name} must be an integer from ${o.min} to ${max}, got ${shownFlagValue(name, v)}`);
    return v;
  };
  const o: JobOverrides = {
    ...finalityDepthOverride(args['finality-depth']),
    lake: localLakeOf(args.lake, jobLake),
    concurrency: positive('concurrency', args.concurrency, TOP_OPTIONS.concurrency),
    rps: positive('rps', args.rps, TOP_OPTIONS.rps),
    strict: args.strict,
    windowBlocks: positive('window-blocks', args['window-blocks'], RANGE_OPTIONS.windowBlocks),
  };
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

function levelOf(args: OutputArgs): Level {
  // Debug events (a line per window: thousands in a backfill) only when asked for, in either format.
  return args.quiet ? 'warn' : args.verbose ? 'debug' : 'info';
}

/** Logs go to stderr as JSON lines off a terminal or with --log-format json; text with live progress on a terminal. */
export function outputFor(args: OutputArgs): { json: boolean; logger: Logger; progress?: TerminalProgress } {
  const json = args['log-format'] === 'json' || (args['log-format'] === undefined && !process.stderr.isTTY);
  const progress = !json && !args.quiet && process.stderr.isTTY ? new TerminalProgress(process.stderr) : undefined;
  const logger = createLogger({
    format: json ? 'json' : 'text',
    level: levelOf(args),
    write: progress ? (line) => progress.print(line) : undefined,
    // Retries show in the progress display's status line, not one scrollback line each.
    take: progress ? (event, line) => event === 'request.retry' && progress.status(line) : undefined,
  });
  return { json, logger, progress };
}

/** Runs a job, prints its report, and sets the process exit code from the outcome. */
export async function executeJob(job: Job, args: RunArgs, extra: Pick<RunOptions, 'rangeOverride'> = {}): Promise<RunReport> {
  // `--report -`: the JSON report is the command's output (for a pipe into jq); the text report moves to stderr.
  const reportToStdout = args.report === '-';
  if (args.report && !reportToStdout) await checkReportPath(args.report);
  const { json, logger, progress } = outputFor(args);
  let report: RunReport;
  const stop = new AbortController();
  let signal: NodeJS.Signals | undefined;
  const onSignal = (sig: NodeJS.Signals): void => {
    if (signal) {
      // A second Ctrl-C: stop now. The lock names this (then dead) process, so the next command recovers the lake.
      process.stderr.write(`chainlake: ${sig} again: stopping at once; the next run recovers the lake and resumes\n`);
      process.exit(sig === 'SIGINT' ? EXIT.interrupted : EXIT.terminated);
    }
    signal = sig;
    logger.log(
      'warn',
      'run.interrupted',
      `${sig === 'SIGINT' ? 'interrupted (Ctrl-C)' : 'terminated (SIGTERM)'}: no new requests; committing every window already fetched (a window in mid-fetch is left to the next run), then releasing the lake (${sig === 'SIGINT' ? 'Ctrl-C' : 'SIGTERM'} again stops at once)`,
      { signal: sig },
    );
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    // Loaded here: a job refused before it runs (a bad file, a bad flag) need not load the engines.
    const { runJob } = await import('../pipeline/run.js');
    report = await runJob(job, {
      ...extra,
      logger,
      fullRefresh: args['full-refresh'],
      waitForLock: args.wait,
      onStart: (live) => progress?.start(live),
      signal: stop.signal,
    });
  } finally {
    progress?.stop();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  if (reportToStdout) process.stdout.write(JSON.stringify(report, null, 2) + '\n');
  else if (args.report) await writeFile(args.report, JSON.stringify(report, null, 2) + '\n');
  if (json) logger.log('info', 'run.report', `run ${report.runId} ${report.status}`, { report });
  const textOut = reportToStdout ? process.stderr : process.stdout;
  if (!args.quiet || report.status !== 'complete') textOut.write(formatReport(report, (textOut.isTTY && textOut.columns) || 80) + '\n');
  if (report.unreachable) process.stderr.write(`chainlake: nothing answers at ${report.unreachable.join(', ')}\nhint: ${UNREACHABLE_HINT}\n`);
  else if (setupFailure(report)) {
    const first = report.errors[0]!;
    const hint = first.code === 'CHAINLAKE_API_REFUSED' ? `\nhint: ${REFUSED_HINT}` : '';
    process.stderr.write(`chainlake: every window failed: ${first.error}${hint}\n`);
  }
  process.exitCode = signal ? (signal === 'SIGINT' ? EXIT.interrupted : EXIT.terminated) : exitCodeOf(report, job.lake.strict);
  return report;
}

/**
 * Every window failed for a reason a person must fix (a refused key): what a worker that took only such windows
 * exits 2 for too, since no re-run catches it up.
 */
function setupFailure(report: Pick<RunReport, 'status' | 'errors'>): boolean {
  return report.status === 'failed' && report.errors.length > 0 && report.errors.every((e) => e.code !== undefined && SETUP_CODES.has(e.code));
}

/** The exit code of a run's outcome (a distributed worker's too: it reports its windows in the same words). */
export function exitCodeOf(report: Pick<RunReport, 'status' | 'unreachable' | 'errors'>, strict: boolean): number {
  if (report.status === 'complete') return EXIT.ok;
  if (report.status === 'quota_reached') return EXIT.quotaReached;
  if (report.unreachable || setupFailure(report)) return EXIT.usage;
  return strict && report.errors.every((e) => e.code === 'CHAINLAKE_STRICT_REJECTS') ? EXIT.strictRejects : EXIT.windowsFailed;
}

/** `--from-block/--to-block`, validated: block numbers are non-negative integers, the range not inverted. */
export function blockRangeArgs(args: {
  'from-block'?: number;
  'to-block'?: number;
  head?: number;
}): { fromBlock?: number; toBlock?: number; head?: number } | undefined {
  const from = args['from-block'];
  const to = args['to-block'];
  for (const [name, v] of [
    ['from-block', from],
    ['to-block', to],
    ['head', args.head],
  ] as const) {
    if (v !== undefined && (!Number.isSafeInteger(v) || v < 0))
      throw new CliError(`--${name} must be a block number (a non-negative integer), got ${shownFlagValue(name, v)}`);
  }
  if (from !== undefined && to !== undefined && to < from) throw new CliError(`--to-block ${to} is below --from-block ${from}`);
  if (args.head !== undefined) return { fromBlock: from, toBlock: to, head: args.head };
  return from === undefined && to === undefined ? undefined : { fromBlock: from, toBlock: to };
}
