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
import { createLogger } from '../../pipeline/log.js';
import { CronSchedule, cronProblem } from '../../schedule/cron.js';
import { realSchedulerClock, Scheduler, type ScheduledJob } from '../../schedule/scheduler.js';
import { CliError } from '../exit-codes.js';
import { lakeNamedBy } from '../common.js';
import { DEFAULT_LAKE, describeTarget, LAKE_ENV, resolveLakeTarget } from '../lake-target.js';
import { makeScratch } from '../../pipeline/scratch.js';

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
      if (lake === undefined) throw Object.assign(new Error(`no job named ${job} is scheduled here (jobs: ${[...lakes.keys()].join(', ')})`), { status: 404 });
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
    if (args.cron !== undefined) {
      const problem = cronProblem(args.cron);
      if (problem) throw new CliError(`--cron: not a valid cron expression (${problem})`);
    }
    const port = args['metrics-port'];
    if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535))
      throw new CliError(`--metrics-port: expected a port number from 0 to 65535, got ${String(port)}`);
    const jobs: ScheduledJob[] = [];
    const names = new Map<string, string>();
    // The lake of each job by the one lake-choice rule (lake-target.ts), chosen once here and given to every run
    // as --lake: the schedule's log names the lake its runs write, and /report draws it.
    const lakes = new Map<string, ReturnType<typeof resolveLakeTarget>>();
    const reportLakes = new Map<string, string>();
    for (const file of args.jobs) {
      const { job, doc } = await loadJobDocument(file, process.env);
      names.set(file, job.name);
      const target = resolveLakeTarget({ lake: args.lake }, { jobLake: lakeNamedBy(doc), env: { [LAKE_ENV]: process.env[LAKE_ENV] } });
      lakes.set(file, target);
      reportLakes.set(job.name, target.kind === 'local' ? target.lake : DEFAULT_LAKE);
      const expr = args.cron ?? job.schedule;
      if (!expr) throw new CliError(`${file}: the job has no "schedule" and no --cron was given`);
      jobs.push({ file, schedule: new CronSchedule(expr) });
    }
    const json = args['log-format'] === 'json' || (args['log-format'] === undefined && !process.stderr.isTTY);
    const logger = createLogger({ format: json ? 'json' : 'text', level: args.quiet ? 'warn' : 'info' });
    const stop = new AbortController();
    for (const sig of ['SIGINT', 'SIGTERM'] as const) {
      process.once(sig, () => {
        logger.log('info', 'schedule.stopping', `${sig}: no new runs; waiting for runs in progress to finish`);
        stop.abort();
      });
    }
    const metrics = port === undefined ? undefined : new RunMetrics();
    const reports = metrics ? await makeScratch('schedule') : undefined;
    let server: MetricsServer | undefined;
    if (metrics) {
      try {
        server = await serveMetrics(metrics, { host: args['metrics-host'], port: port!, pages: { '/report': reportPage(reportLakes) } });
      } catch (e) {
        await rm(reports!, { recursive: true, force: true });
        throw new CliError(`--metrics-port ${port!} on ${args['metrics-host']}: ${(e as Error).message}`);
      }
      logger.log('info', 'schedule.metrics', `serving ${server.url}/metrics, ${server.url}/healthz and ${server.url}/report`, { url: server.url });
    }
    for (const [file, target] of lakes)
      logger.log('info', 'schedule.job', `${file}: writes ${describeTarget(target)}`, {
        file,
        lake: target.kind === 'local' ? target.lake : undefined,
        from: target.from,
      });
    let fired = 0;
    const run = async (file: string): Promise<number> => {
      const job = names.get(file) ?? file;
      const target = lakes.get(file);
      const lake = target?.kind === 'local' ? target.lake : DEFAULT_LAKE;
      if (!metrics) return runInChild(file, lake, json ? 'json' : 'text');
      const reportFile = path.join(reports!, `run-${++fired}.json`);
      metrics.started(job);
      const code = await runInChild(file, lake, json ? 'json' : 'text', reportFile);
      metrics.finished(job, code, new Date(), await takeReport(reportFile));
      return code;
    };
    const scheduler = new Scheduler(jobs, {
      clock: realSchedulerClock,
      run,
      onEvent: (e) => {
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
              {
                file: e.file,
                at,
                exitCode: e.exitCode,
                durationMs: e.durationMs,
              },
            );
          case 'skipped':
            return logger.log('warn', 'schedule.skip', `${e.file}: skipped the run due at ${at}: ${e.reason}`, { file: e.file, at, reason: e.reason });
        }
      },
    });
    try {
      await scheduler.start(stop.signal);
    } finally {
      await server?.close();
      if (reports) await rm(reports, { recursive: true, force: true });
    }
  },
};
