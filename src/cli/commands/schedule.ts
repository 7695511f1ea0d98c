import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { CommandModule } from 'yargs';
import { loadJobFile } from '../../pipeline/job.js';
import { createLogger } from '../../pipeline/log.js';
import { CronSchedule, cronProblem } from '../../schedule/cron.js';
import { realSchedulerClock, Scheduler, type ScheduledJob } from '../../schedule/scheduler.js';
import { CliError } from '../exit-codes.js';

interface Args {
  jobs: string[];
  cron?: string;
  'log-format'?: 'text' | 'json';
  quiet?: boolean;
}

const MAIN = fileURLToPath(new URL('../main.js', import.meta.url));

/** Each run is its own process: a crash or leak in one run cannot take the scheduler down. */
function runInChild(file: string, logFormat: string): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MAIN, 'run', file, '--log-format', logFormat], { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', () => resolve(1));
    child.on('close', (code) => resolve(code ?? 1));
  });
}

export const scheduleCommand: CommandModule<object, Args> = {
  command: 'schedule <jobs..>',
  describe: 'Stay running and fire each job on its cron expression (the job\'s "schedule", in UTC); a job never overlaps itself',
  builder: (y) =>
    y
      .positional('jobs', { type: 'string', array: true, demandOption: true, describe: 'Job files' })
      .option('cron', { type: 'string', describe: 'Cron expression for every job given (overrides their "schedule")' })
      .example('$0 schedule jobs/nightly.json', 'Run the nightly job on its own schedule until stopped')
      .example('$0 schedule --cron "*/30 * * * *" jobs/a.json jobs/b.json', 'Run two jobs every 30 minutes'),
  handler: async (args) => {
    if (args.cron !== undefined) {
      const problem = cronProblem(args.cron);
      if (problem) throw new CliError(`--cron: not a valid cron expression (${problem})`);
    }
    const jobs: ScheduledJob[] = [];
    for (const file of args.jobs) {
      const job = await loadJobFile(file);
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
    const scheduler = new Scheduler(jobs, {
      clock: realSchedulerClock,
      run: (file) => runInChild(file, json ? 'json' : 'text'),
      onEvent: (e) => {
        const at = e.at.toISOString();
        switch (e.kind) {
          case 'scheduled':
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
    await scheduler.start(stop.signal);
  },
};
