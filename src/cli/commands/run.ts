import type { CommandModule } from 'yargs';
import { loadJobFile } from '../../pipeline/job.js';
import { applyRunOverrides, executeJob, withRunOptions, type RunArgs } from '../common.js';

interface Args extends RunArgs {
  job: string;
}

export const runCommand: CommandModule<object, Args> = {
  command: 'run <job>',
  describe: 'Run a job file: fetch its datasets and merge them into the lake',
  builder: (y) =>
    withRunOptions(y.positional('job', { type: 'string', demandOption: true, describe: 'Path to the job file (JSON)' }))
      .example('$0 run jobs/demo.json', 'Export the demo job from the embedded simulator into data/lake')
      .example('$0 run jobs/nightly.json --lake /srv/lake --rps 20', 'Run a job into another lake, at most 20 requests/s') as never,
  handler: async (args) => {
    const job = applyRunOverrides(await loadJobFile(args.job), args);
    await executeJob(job, args);
  },
};
