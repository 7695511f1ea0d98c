import type { CommandModule } from 'yargs';
import { loadJobDocument } from '../../pipeline/job.js';
import { blockRangeArgs, executeJob, lakeNamedBy, runOverrides, withBlockRangeOptions, withRunOptions, type RunArgs } from '../common.js';

interface Args extends RunArgs {
  job: string;
  'from-block'?: number;
  'to-block'?: number;
  head?: number;
  'dry-run'?: boolean;
}

export const runCommand: CommandModule<object, Args> = {
  command: 'run <job>',
  describe: 'Run a job file: fetch its datasets and merge them into the lake',
  builder: (y) =>
    withBlockRangeOptions(withRunOptions(y.positional('job', { type: 'string', demandOption: true, describe: 'Path to the job file (JSON)' })))
      .option('dry-run', { type: 'boolean', describe: 'Print the plan (windows, requests, duration) and fetch no data; same as `chainlake plan`' })
      .example('$0 run jobs/demo.json', 'Export the demo job from the embedded simulator into data/lake')
      .example('$0 run jobs/nightly.example.json --lake /srv/lake --rps 20', 'Run a job into another lake, at most 20 requests/s')
      .example('$0 run jobs/nightly.example.json --from-block 100000 --to-block 120000', 'Backfill one block range')
      .example('$0 run jobs/nightly.example.json --wait --report report.json', 'Wait for a running job to finish first; write the report as JSON'),
  handler: async (args) => {
    const { job } = await loadJobDocument(args.job, process.env, (doc) => runOverrides(args, lakeNamedBy(doc)));
    const rangeOverride = blockRangeArgs(args);
    if (args['dry-run']) {
      const { printPlan } = await import('./plan.js');
      await printPlan(job, args, rangeOverride);
      return;
    }
    await executeJob(job, args, { rangeOverride });
  },
};
