import type { CommandModule } from 'yargs';
import { datasetNames } from '../../datasets/registry.js';
import { parseJob } from '../../pipeline/job.js';
import { applyRunOverrides, executeJob, withRunOptions, type RunArgs } from '../common.js';

interface Args extends RunArgs {
  dataset: string;
  address?: string[];
  'from-block'?: number;
  'to-block'?: number;
  network: string;
  simulator?: boolean;
  input?: boolean;
}

export const exportCommand: CommandModule<object, Args> = {
  command: 'export <dataset>',
  describe: 'Export one dataset ad hoc, without a job file',
  builder: (y) =>
    withRunOptions(
      y
        .positional('dataset', { type: 'string', demandOption: true, choices: datasetNames(), describe: 'Dataset to export' })
        .option('address', { type: 'string', array: true, describe: 'Address scope (repeat for several)' })
        .option('from-block', { type: 'number', describe: 'First block (default 0)' })
        .option('to-block', { type: 'number', describe: 'Last block (default: the head, pinned at start)' })
        .option('network', { type: 'string', choices: ['mainnet', 'testnet'], default: 'mainnet', describe: 'Network' })
        .option('simulator', { type: 'boolean', describe: 'Target the embedded simulator instead of CHAINLAKE_*_URL' })
        .option('input', { type: 'boolean', describe: 'Ask for input data (transactions, internal transactions)' }),
    )
      .example(
        '$0 export transactions --address 0xabc… --from-block 1000 --to-block 2000',
        'Transactions of one address in a block range, from CHAINLAKE_MAINNET_URL',
      )
      .example('$0 export transactions --simulator --address 0xabc… --lake /tmp/lake', 'The same from the embedded simulator') as never,
  handler: async (args) => {
    const doc: Record<string, unknown> = {
      name: `export-${args.dataset}`,
      network: args.network,
      target: args.simulator ? 'simulator' : 'api',
      range: { fromBlock: args['from-block'] ?? 0, ...(args['to-block'] !== undefined ? { toBlock: args['to-block'] } : {}) },
      datasets: { [args.dataset]: { addresses: args.address ?? [], ...(args.input !== undefined ? { input: args.input } : {}) } },
    };
    const job = applyRunOverrides(parseJob(doc, 'command line'), args);
    await executeJob(job, args);
  },
};
