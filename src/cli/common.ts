import { writeFile } from 'node:fs/promises';
import type { Argv } from 'yargs';
import type { Job } from '../pipeline/job.js';
import { createLogger, type Level } from '../pipeline/log.js';
import { formatReport, type RunReport } from '../pipeline/report.js';
import { runJob } from '../pipeline/run.js';
import { EXIT } from './exit-codes.js';

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
}

/** Flags shared by every command that runs a job (run, export). */
export function withRunOptions<T>(y: Argv<T>) {
  return y
    .option('lake', { type: 'string', describe: 'Lake directory (overrides the job)' })
    .option('concurrency', { type: 'number', describe: 'Requests in flight at once (overrides the job)' })
    .option('rps', { type: 'number', describe: 'Requests per second across the run (overrides the job)' })
    .option('strict', { type: 'boolean', describe: 'Fail the run (exit 3) if any row does not convert' })
    .option('report', { type: 'string', describe: 'Also write the run report as JSON to this file' });
}

export function applyRunOverrides(job: Job, args: RunArgs): Job {
  const positive = (name: string, v: number | undefined): number | undefined => {
    if (v === undefined) return undefined;
    if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} must be a positive integer, got ${v}`);
    return v;
  };
  return {
    ...job,
    lake: args.lake ?? job.lake,
    concurrency: positive('concurrency', args.concurrency) ?? job.concurrency,
    rps: positive('rps', args.rps) ?? job.rps,
    strict: args.strict ?? job.strict,
  };
}

function levelOf(args: OutputArgs): Level {
  return args.quiet ? 'warn' : args.verbose ? 'debug' : 'info';
}

/** Runs a job, prints its report, and sets the process exit code from the outcome. */
export async function executeJob(job: Job, args: RunArgs): Promise<RunReport> {
  const json = args['log-format'] === 'json' || (args['log-format'] === undefined && !process.stderr.isTTY && process.env.CHAINLAKE_LOG_FORMAT === 'json');
  const logger = createLogger({ format: json ? 'json' : 'text', level: levelOf(args) });
  const report = await runJob(job, { logger });
  if (args.report) await writeFile(args.report, JSON.stringify(report, null, 2) + '\n');
  if (json) logger.log('info', 'run.report', `run ${report.runId} ${report.status}`, { report });
  if (!args.quiet || report.status !== 'complete') process.stdout.write(formatReport(report) + '\n');
  process.exitCode =
    report.status !== 'complete' ? (job.strict && report.errors.every((e) => /strict mode/.test(e.error)) ? EXIT.strictRejects : EXIT.windowsFailed) : EXIT.ok;
  return report;
}
