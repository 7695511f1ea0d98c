import { writeFile } from 'node:fs/promises';
import type { Argv } from 'yargs';
import type { Job } from '../pipeline/job.js';
import { createLogger, type Level, type Logger } from '../pipeline/log.js';
import { formatReport, type RunReport } from '../pipeline/report.js';
import { runJob, type RunOptions } from '../pipeline/run.js';
import { CliError, EXIT } from './exit-codes.js';
import { TerminalProgress } from './progress.js';

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
}

/** Flags that say where and how politely a job runs: `plan` estimates with them, `run`/`export` use them. */
export function withTargetOptions<T>(y: Argv<T>) {
  return y
    .option('lake', { type: 'string', describe: 'Lake directory (overrides the job)' })
    .option('concurrency', { type: 'number', describe: 'Requests in flight at once (overrides the job)' })
    .option('rps', { type: 'number', describe: 'Requests per second across the run (overrides the job)' })
    .option('full-refresh', { type: 'boolean', describe: 'Ignore watermarks and unfinished runs: fetch the whole range again' })
    .option('window-blocks', {
      type: 'number',
      describe: "Blocks per window chunk, fetched in block order (overrides the job's range.windowBlocks; default 100000)",
    });
}

/** `--from-block/--to-block` of a job file command: an explicit range for this run only. */
export function withBlockRangeOptions<T>(y: Argv<T>) {
  return y
    .option('from-block', { type: 'number', describe: 'First block, for this run only (an explicit range: no resume, no incremental)' })
    .option('to-block', { type: 'number', describe: 'Last block, for this run only' });
}

/** Flags shared by every command that runs a job (run, export). */
export function withRunOptions<T>(y: Argv<T>) {
  return withTargetOptions(y)
    .option('strict', { type: 'boolean', describe: 'Fail the run (exit 3) if any row does not convert' })
    .option('wait', { type: 'boolean', describe: 'If another run holds the lake, wait for it instead of exiting 75' })
    .option('report', { type: 'string', describe: 'Also write the run report as JSON to this file' });
}

export function applyRunOverrides(job: Job, args: RunArgs): Job {
  // A bad flag is a usage error (exit 2), with the bounds a job file has for the same setting.
  const positive = (name: string, v: number | undefined, max: number): number | undefined => {
    if (v === undefined) return undefined;
    if (!Number.isInteger(v) || v < 1 || v > max) throw new CliError(`--${name} must be an integer from 1 to ${max}, got ${v}`);
    return v;
  };
  return {
    ...job,
    lake: args.lake ?? job.lake,
    concurrency: positive('concurrency', args.concurrency, 256) ?? job.concurrency,
    rps: positive('rps', args.rps, 100_000) ?? job.rps,
    strict: args.strict ?? job.strict,
    range: {
      ...job.range,
      windowBlocks: positive('window-blocks', args['window-blocks'], Number.MAX_SAFE_INTEGER) ?? job.range.windowBlocks,
      ...(args['window-blocks'] !== undefined || job.range.fixedChunks ? { fixedChunks: true } : {}),
    },
  };
}

function levelOf(args: OutputArgs, json: boolean): Level {
  // JSON logs are for machines: every event is a line unless --quiet.
  return args.quiet ? 'warn' : args.verbose || json ? 'debug' : 'info';
}

/** Logs go to stderr as JSON lines off a terminal or with --log-format json; text with live progress on a terminal. */
export function outputFor(args: OutputArgs): { json: boolean; logger: Logger; progress?: TerminalProgress } {
  const json = args['log-format'] === 'json' || (args['log-format'] === undefined && !process.stderr.isTTY);
  const progress = !json && !args.quiet && process.stderr.isTTY ? new TerminalProgress(process.stderr) : undefined;
  const logger = createLogger({ format: json ? 'json' : 'text', level: levelOf(args, json), write: progress ? (line) => progress.print(line) : undefined });
  return { json, logger, progress };
}

/** Runs a job, prints its report, and sets the process exit code from the outcome. */
export async function executeJob(job: Job, args: RunArgs, extra: Pick<RunOptions, 'rangeOverride'> = {}): Promise<RunReport> {
  const { json, logger, progress } = outputFor(args);
  let report: RunReport;
  try {
    report = await runJob(job, { ...extra, logger, fullRefresh: args['full-refresh'], waitForLock: args.wait, onStart: (live) => progress?.start(live) });
  } finally {
    progress?.stop();
  }
  if (args.report) await writeFile(args.report, JSON.stringify(report, null, 2) + '\n');
  if (json) logger.log('info', 'run.report', `run ${report.runId} ${report.status}`, { report });
  if (!args.quiet || report.status !== 'complete') process.stdout.write(formatReport(report) + '\n');
  process.exitCode = exitCodeOf(report, job.strict);
  return report;
}

export function exitCodeOf(report: RunReport, strict: boolean): number {
  if (report.status === 'complete') return EXIT.ok;
  if (report.status === 'quota_reached') return EXIT.quotaReached;
  return strict && report.errors.every((e) => /strict mode/.test(e.error)) ? EXIT.strictRejects : EXIT.windowsFailed;
}

/** `--from-block/--to-block`, validated: block numbers are non-negative integers, the range not inverted. */
export function blockRangeArgs(args: { 'from-block'?: number; 'to-block'?: number }): { fromBlock?: number; toBlock?: number } | undefined {
  const from = args['from-block'];
  const to = args['to-block'];
  for (const [name, v] of [
    ['from-block', from],
    ['to-block', to],
  ] as const) {
    if (v !== undefined && (!Number.isSafeInteger(v) || v < 0)) throw new CliError(`--${name} must be a block number (a non-negative integer), got ${v}`);
  }
  if (from !== undefined && to !== undefined && to < from) throw new CliError(`--to-block ${to} is below --from-block ${from}`);
  return from === undefined && to === undefined ? undefined : { fromBlock: from, toBlock: to };
}
