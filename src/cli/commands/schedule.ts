import { spawn } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { RunMetrics } from '../../observe/metrics.js';
import { serveMetrics, type MetricsServer, type Page } from '../../observe/server.js';
import { lakeReportHtml, renderIndex } from '../../report/report.js';
import type { RunReport } from '../../pipeline/report.js';
import { fileURLToPath } from 'node:url';
import type { CommandModule } from 'yargs';
import { loadJobDocument } from '../../pipeline/job.js';
import { createLogger, type Logger } from '../../pipeline/log.js';
import { CronSchedule, cronProblem } from '../../schedule/cron.js';
import { realSchedulerClock, Scheduler, type ScheduledJob, type SchedulerEvent } from '../../schedule/scheduler.js';
import { CliError } from '../exit-codes.js';
import { lakeNamedBy } from '../common.js';
import { DEFAULT_LAKE, describeTarget, LAKE_ENV, resolveLakeTarget } from '../lake-target.js';
import { makeScratch } from '../../load/scratch.js';

interface Args {
  jobs: string[];
  lake?: string;
  cron?: string;
  'log-format'?: 'text' | 'json';
  quiet?: boolean;
  'metrics-port'?: number;
  'metrics-host': string;
}

const MAIN = fileURLToPath(new URL('../main.js', import.meta.url));

/**
 * Each run is its own process: a crash or leak in one run cannot take the scheduler down. With `reportFile`,
 * the run writes its report there (the metrics read it: the run's own figures, exactly).
 */
function runInChild(file: string, lake: string, logFormat: string, reportFile?: string): Promise<number> {
  return new Promise((resolve) => {
    const args = [MAIN, 'run', file, '--lake', lake, '--log-format', logFormat, ...(reportFile ? ['--report', reportFile] : [])];
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', () => resolve(1));
    child.on('close', (code) => resolve(code ?? 1));
  });
}

/** The report a run wrote, or undefined when it wrote none (it failed before, or was killed). */
async function takeReport(file: string): Promise<RunReport | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as RunReport;
  } catch {
    return undefined;
  } finally {
    await rm(file, { force: true });
  }
}

/**
 * `/report`: the report of the jobs' lake, read when asked (what the last run committed). Jobs writing several
 * lakes: `/report?job=NAME` is the lake of that job, and `/report` lists them.
 */
function reportPage(lakes: ReadonlyMap<string, string>): Page {
  return async (query) => {
    const job = query.get('job');
    if (job !== null) {
      const lake = lakes.get(job);
      // Answered 404 with the message (observe/server.ts reads `status`); a CliError as every error raised on purpose.
      if (lake === undefined)
        throw Object.assign(new CliError(`no job named ${job} is scheduled here (jobs: ${[...lakes.keys()].join(', ')})`), { status: 404 });
      return lakeReportHtml({ kind: 'local', lake });
    }
    const distinct = [...new Set(lakes.values())];
    if (distinct.length === 1) return lakeReportHtml({ kind: 'local', lake: distinct[0]! });
    return renderIndex(
      'chainlake reports',
      [...lakes.entries()].map(([name, lake]) => ({ href: `/report?job=${encodeURIComponent(name)}`, label: `${name}: ${lake}` })),
    );
  };
}

/** The flags yargs cannot check: the cron expression and the metrics port (returned). */
function checkedFlags(args: Args): number | undefined {
  if (args.cron !== undefined) {
    const problem = cronProblem(args.cron);
    if (problem) throw new CliError(`--cron: not a valid cron expression (${problem})`);
  }
  const port = args['metrics-port'];
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535))
    throw new CliError(`--metrics-port: expected a port number from 0 to 65535, got ${String(port)}`);
  return port;
}

/** The jobs as the schedule runs them: each one's schedule, name, lake, and the lake /report draws for it. */
interface ScheduledJobs {
  jobs: ScheduledJob[];
  /** The job's name, by file. */
  names: Map<string, string>;
  /** The lake each job's runs write, by file. */
  lakes: Map<string, ReturnType<typeof resolveLakeTarget>>;
  /** The lake /report draws, by job name. */
  reportLakes: Map<string, string>;
}

/**
 * Every job file loaded and checked before the schedule starts. The lake of each job by the one lake-choice rule
 * (lake-target.ts), chosen once here and given to every run as --lake: the schedule's log names the lake its runs
 * write, and /report draws it.
 */
async function loadScheduledJobs(args: Args): Promise<ScheduledJobs> {
  const out: ScheduledJobs = { jobs: [], names: new Map(), lakes: new Map(), reportLakes: new Map() };
  for (const file of args.jobs) {
    const { job, doc } = await loadJobDocument(file, process.env);
    out.names.set(file, job.name);
    const target = resolveLakeTarget({ lake: args.lake }, { jobLake: lakeNamedBy(doc), env: { [LAKE_ENV]: process.env[LAKE_ENV] } });
    out.lakes.set(file, target);
    out.reportLakes.set(job.name, target.kind === 'local' ? target.lake : DEFAULT_LAKE);
    const expr = args.cron ?? job.schedule;
    if (!expr) throw new CliError(`${file}: the job has no "schedule" and no --cron was given`);
    out.jobs.push({ file, schedule: new CronSchedule(expr) });
  }
  return out;
}

/** Aborted by SIGINT or SIGTERM: no new runs start, those in progress finish. */
function stopOnSignals(logger: Logger): AbortController {
  const stop = new AbortController();
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      logger.log('info', 'schedule.stopping', `${sig}: no new runs; waiting for runs in progress to finish`);
      stop.abort();
    });
  }
  return stop;
}

/** The metrics of the schedule's runs, served with /healthz and /report, and the folder their reports pass through. */
interface ServedMetrics {
  metrics: RunMetrics;
  reports: string;
  close(): Promise<void>;
}

async function startMetrics(port: number, host: string, reportLakes: ReadonlyMap<string, string>, logger: Logger): Promise<ServedMetrics> {
  const metrics = new RunMetrics();
  const reports = await makeScratch('schedule');
  let server: MetricsServer;
  try {
    server = await serveMetrics(metrics, { host, port, pages: { '/report': reportPage(reportLakes) } });
  } catch (e) {
    await rm(reports, { recursive: true, force: true });
    throw new CliError(`--metrics-port ${port} on ${host}: ${(e as Error).message}`);
  }
  logger.log('info', 'schedule.metrics', `serving ${server.url}/metrics, ${server.url}/healthz and ${server.url}/report`, { url: server.url });
  return {
    metrics,
    reports,
    async close() {
      await server.close();
      await rm(reports, { recursive: true, force: true });
    },
  };
}

/** Runs one job file in a child process into its lake; with metrics, the run's report feeds them. */
function runner(scheduled: ScheduledJobs, logFormat: 'json' | 'text', served: ServedMetrics | undefined): (file: string) => Promise<number> {
  let fired = 0;
  return async (file) => {
    const job = scheduled.names.get(file) ?? file;
    const target = scheduled.lakes.get(file);
    const lake = target?.kind === 'local' ? target.lake : DEFAULT_LAKE;
    if (!served) return runInChild(file, lake, logFormat);
    const reportFile = path.join(served.reports, `run-${++fired}.json`);
    served.metrics.started(job);
    const code = await runInChild(file, lake, logFormat, reportFile);
    served.metrics.finished(job, code, new Date(), await takeReport(reportFile));
    return code;
  };
}

/** The scheduler's events as log lines (and the next run's time as a metric). */
function eventLogger(logger: Logger, names: ReadonlyMap<string, string>, metrics: RunMetrics | undefined): (e: SchedulerEvent) => void {
  return (e) => {
    const at = e.at.toISOString();
    switch (e.kind) {
      case 'scheduled':
        metrics?.scheduled(names.get(e.file) ?? e.file, e.at);
        return logger.log('info', 'schedule.next', `${e.file}: next run at ${at}`, { file: e.file, at });
      case 'started':
        return logger.log('info', 'schedule.start', `${e.file}: run started at ${at}`, { file: e.file, at });
      case 'finished':
        return logger.log(
          e.exitCode === 0 ? 'info' : 'warn',
          'schedule.finish',
          `${e.file}: run finished with exit code ${e.exitCode} in ${(e.durationMs / 1000).toFixed(1)} s`,
          { file: e.file, at, exitCode: e.exitCode, durationMs: e.durationMs },
        );
      case 'skipped':
        return logger.log('warn', 'schedule.skip', `${e.file}: skipped the run due at ${at}: ${e.reason}`, { file: e.file, at, reason: e.reason });
    }
  };
}

export const scheduleCommand: CommandModule<object, Args> = {
  command: 'schedule <jobs..>',
  describe: 'Stay running and fire each job on its cron expression (the job\'s "schedule", in UTC); a job never overlaps itself',
  builder: (y) =>
    y
      .positional('jobs', { type: 'string', array: true, demandOption: true, describe: 'Job files' })
      .option('lake', {
        type: 'string',
        describe: `Lake directory of every job given (overrides the jobs' "lake"; default: each job's lake, else $${LAKE_ENV}, else ${DEFAULT_LAKE})`,
      })
      .option('cron', { type: 'string', describe: 'Cron expression for every job given (overrides their "schedule")' })
      .option('metrics-port', {
        type: 'number',
        describe:
          "Serve /metrics (Prometheus), /healthz and /report (the jobs' lake as `chainlake report` draws it) on this port (0 picks a free one; off when not given)",
      })
      .option('metrics-host', { type: 'string', default: '127.0.0.1', describe: 'Interface for --metrics-port (0.0.0.0 to let a scraper on another host in)' })
      .example('$0 schedule jobs/nightly.example.json', 'Run the nightly job on its own schedule until stopped')
      .example('$0 schedule --cron "*/30 * * * *" jobs/demo.json jobs/token-holders.json', 'Run two jobs every 30 minutes')
      .example('$0 schedule jobs/nightly.example.json --metrics-port 9464', 'Also serve /metrics, /healthz and /report on 127.0.0.1:9464'),
  handler: async (args) => {
    const port = checkedFlags(args);
    const scheduled = await loadScheduledJobs(args);
    const json = args['log-format'] === 'json' || (args['log-format'] === undefined && !process.stderr.isTTY);
    const logger = createLogger({ format: json ? 'json' : 'text', level: args.quiet ? 'warn' : 'info' });
    const stop = stopOnSignals(logger);
    const metrics = port === undefined ? undefined : await startMetrics(port, args['metrics-host'], scheduled.reportLakes, logger);
    for (const [file, target] of scheduled.lakes)
      logger.log('info', 'schedule.job', `${file}: writes ${describeTarget(target)}`, {
        file,
        lake: target.kind === 'local' ? target.lake : undefined,
        from: target.from,
      });
    const scheduler = new Scheduler(scheduled.jobs, {
      clock: realSchedulerClock,
      run: runner(scheduled, json ? 'json' : 'text', metrics),
      onEvent: eventLogger(logger, scheduled.names, metrics?.metrics),
    });
    try {
      await scheduler.start(stop.signal);
    } finally {
      await metrics?.close();
    }
  },
};
