import type { CommandModule } from 'yargs';
import { scopeKindsOf, type DatasetDef, type ScopeKind } from '../../datasets/dataset.js';
import { datasetNames, getDataset } from '../../datasets/registry.js';
import { JobError, parseJob, type Job, type JobOverrides } from '../../pipeline/job.js';
import { blockRangeArgs, runOverrides, executeJob, withRunOptions, type RunArgs } from '../common.js';
import { CliError } from '../exit-codes.js';

interface Args extends RunArgs {
  dataset: string;
  address?: string[];
  contract?: string[];
  topic0?: string;
  topic1?: string;
  topic2?: string;
  topic3?: string;
  operand?: string;
  tx?: string[];
  block?: (string | number)[];
  pool?: string[];
  pid?: number[];
  token?: string[];
  holder?: string[];
  unit?: string;
  'unit-count'?: number;
  'unit-multiplier'?: number;
  endpoint?: string[];
  'from-block'?: number;
  'to-block'?: number;
  head?: number;
  network: string;
  simulator?: boolean;
  input?: boolean;
}

/** Which scope kinds each flag feeds; a flag a dataset cannot use is an error, not silently ignored. */
const FLAG_KINDS: Record<string, ScopeKind[]> = {
  address: ['address', 'address_batch'],
  contract: ['contract', 'contract_topics'],
  topic0: ['contract_topics'],
  topic1: ['contract_topics'],
  topic2: ['contract_topics'],
  topic3: ['contract_topics'],
  operand: ['contract_topics'],
  tx: ['transaction'],
  block: ['block', 'block_or_latest'],
  pool: ['pool'],
  pid: ['pid'],
  token: ['token', 'token_holder'],
  holder: ['token_holder'],
  unit: ['chart'],
  'unit-count': ['chart'],
  'unit-multiplier': ['chart'],
};

/** The block flag takes numbers and "from-to" ranges; numbers stay numbers so the job parser checks them. */
const blockValue = (b: string | number): string | number => (typeof b === 'string' && /^\d+$/.test(b) ? Number(b) : b);

/** The flag behind each job key `export` fills, so its errors speak the flags the user typed. */
const KEY_FLAGS: [RegExp, string][] = [
  [/^range\.fromBlock/, '--from-block'],
  [/^range\.toBlock/, '--to-block'],
  [/^range$/, '--from-block/--to-block'],
  [/^datasets\.\w+\.addresses/, '--address'],
  [/^datasets\.\w+\.transactions/, '--tx'],
  [/^datasets\.\w+\.contracts/, '--contract'],
  [/^datasets\.\w+\.topics\[(\d)\]/, '--topic$1'],
  [/^datasets\.\w+\.topics/, '--topic0..3'],
  [/^datasets\.\w+\.operand/, '--operand'],
  [/^datasets\.\w+\.blocks/, '--block'],
  [/^datasets\.\w+\.pools/, '--pool'],
  [/^datasets\.\w+\.pids/, '--pid'],
  [/^datasets\.\w+\.tokens/, '--token'],
  [/^datasets\.\w+\.pairs\[\d+\]\.holder/, '--holder'],
  [/^datasets\.\w+\.pairs/, '--token/--holder'],
  [/^datasets\.\w+\.charts\[\d+\]\.unit_count/, '--unit-count'],
  [/^datasets\.\w+\.charts\[\d+\]\.unit_multiplier/, '--unit-multiplier'],
  [/^datasets\.\w+\.charts/, '--unit'],
  [/^datasets\.\w+\.endpoints/, '--endpoint'],
  [/^datasets\.\w+\.input/, '--input'],
  [/^datasets\.\w+$/, 'the scope flags'],
];

/** A JobError of the job `export` built, re-worded with the flag (and the value's position among repeats). */
export function flagError(e: JobError): CliError {
  for (const [re, flag] of KEY_FLAGS) {
    const m = re.exec(e.where);
    if (!m) continue;
    // `--address a --address b`: say which of the repeated values is wrong.
    const index = /^\[(\d+)\]/.exec(e.where.slice(m[0].length));
    const nth = index ? ` (value ${Number(index[1]) + 1})` : '';
    return new CliError(`${m[0].replace(re, flag)}${nth}: ${e.problem}`);
  }
  return new CliError(e.where.startsWith('endpoints.') ? e.problem : `${e.where ? `${e.where}: ` : ''}${e.problem}`);
}

function jobFromFlags(doc: Record<string, unknown>, overrides: JobOverrides): Job {
  try {
    return parseJob(doc, 'command line', process.env, overrides);
  } catch (e) {
    throw e instanceof JobError ? flagError(e) : e;
  }
}

/** The job file's spec of one dataset, from the scope flags. */
export function datasetSpecFromFlags(def: DatasetDef, args: Partial<Args>): Record<string, unknown> {
  const kinds = new Set(scopeKindsOf(def));
  for (const [flag, feeds] of Object.entries(FLAG_KINDS)) {
    if ((args as Record<string, unknown>)[flag] !== undefined && !feeds.some((k) => kinds.has(k))) {
      throw new CliError(`--${flag} does not apply to ${def.name} (its scopes: ${[...kinds].join(', ')}; see chainlake describe ${def.name})`);
    }
  }
  const spec: Record<string, unknown> = {};
  if (args.address) spec.addresses = args.address;
  if (args.tx) spec.transactions = args.tx;
  if (args.contract) {
    if (kinds.has('contract_topics')) {
      const topics = [args.topic0 ?? null, args.topic1 ?? null, args.topic2 ?? null, args.topic3 ?? null];
      while (topics.length > 0 && topics[topics.length - 1] === null) topics.pop();
      spec.contracts = args.contract;
      if (topics.length > 0) spec.topics = topics;
      if (args.operand !== undefined) spec.operand = args.operand;
    } else spec.contracts = args.contract;
  }
  if (args.block) spec.blocks = args.block.map(blockValue);
  if (args.pool) spec.pools = args.pool;
  if (args.pid) spec.pids = args.pid;
  if (args.holder) {
    if (!args.token) throw new CliError('--holder needs --token: each (token, holder) pair is one scope');
    spec.pairs = args.token.flatMap((token) => args.holder!.map((holder) => ({ token, holder })));
  } else if (args.token) {
    if (!kinds.has('token')) throw new CliError(`${def.name} needs --token together with --holder`);
    spec.tokens = args.token;
  }
  if (args.unit !== undefined || args['unit-count'] !== undefined || args['unit-multiplier'] !== undefined) {
    spec.charts = [{ unit: args.unit, unit_count: args['unit-count'] ?? 24, unit_multiplier: args['unit-multiplier'] ?? 1 }];
  }
  if (args.endpoint) spec.endpoints = args.endpoint;
  if (args.input !== undefined) spec.input = args.input;
  return spec;
}

export const exportCommand: CommandModule<object, Args> = {
  command: 'export <dataset>',
  describe: 'Export one dataset ad hoc, without a job file',
  builder: (y) =>
    withRunOptions(
      y
        .positional('dataset', { type: 'string', demandOption: true, choices: datasetNames(), describe: 'Dataset to export (chainlake describe lists them)' })
        .option('address', { type: 'string', array: true, describe: 'Address scope (repeat for several)' })
        .option('contract', { type: 'string', array: true, describe: 'Contract scope (contracts, event_logs)' })
        .option('topic0', { type: 'string', describe: 'event_logs: topic_0 filter (the spec requires it; without topics, all logs of the contract)' })
        .option('topic1', { type: 'string', describe: 'event_logs: topic_1 filter' })
        .option('topic2', { type: 'string', describe: 'event_logs: topic_2 filter' })
        .option('topic3', { type: 'string', describe: 'event_logs: topic_3 filter' })
        .option('operand', { type: 'string', choices: ['and', 'or'], describe: 'event_logs: how topic_1..3 combine' })
        .option('tx', { type: 'string', array: true, describe: 'Transaction hash scope (internal_transactions, transaction_status)' })
        .option('block', { type: 'string', array: true, describe: 'Block numbers or "from-to" ranges (blocks, staking_rewards)' })
        .option('pool', { type: 'string', array: true, describe: 'Pool contract scope (pool_info)' })
        .option('pid', { type: 'number', array: true, describe: 'Staking pool id scope (staking_info)' })
        .option('token', { type: 'string', array: true, describe: 'Token contract scope (token_supply, nft_inventory; with --holder: pairs)' })
        .option('holder', { type: 'string', array: true, describe: 'Holder for (token, holder) pairs (token_balances, nft_inventory)' })
        .option('unit', { type: 'string', choices: ['minute', 'hour', 'day'], describe: 'stable_chart: time unit' })
        .option('unit-count', { type: 'number', describe: 'stable_chart: number of points (default 24)' })
        .option('unit-multiplier', { type: 'number', describe: 'stable_chart: units per point (default 1)' })
        .option('endpoint', { type: 'string', array: true, describe: 'Only these endpoints of the dataset (ids: chainlake describe <dataset>)' })
        .option('from-block', { type: 'number', describe: 'First block (default 0)' })
        .option('to-block', { type: 'number', describe: 'Last block (default: the head, pinned at start)' })
        .option('head', { type: 'number', describe: 'The chain head, as you know it: nothing is asked to find it' })
        .option('network', { type: 'string', choices: ['mainnet', 'testnet'], default: 'mainnet', describe: 'Network' })
        .option('simulator', { type: 'boolean', describe: 'Target the embedded simulator instead of CHAINLAKE_*_URL' })
        .option('input', { type: 'boolean', describe: 'Ask for input data (transactions, internal_transactions)' }),
    )
      // No job file here: say where the rows go unless told.
      .describe('lake', 'Lake directory [default: $CHAINLAKE_LAKE, else data/lake]')
      .example(
        '$0 export transactions --address 0xabc… --from-block 1000 --to-block 2000',
        'Transactions of one address in a block range, from CHAINLAKE_MAINNET_URL',
      )
      .example('$0 export transactions --simulator --address 0xabc… --lake /tmp/lake', 'The same from the embedded simulator')
      .example('$0 export event_logs --simulator --contract 0xabc… --topic0 0xddf2…', 'Transfer logs of a contract')
      .example('$0 export token_balances --simulator --token 0xabc… --holder 0xdef…', 'One holder’s balance of one token')
      .example('$0 export stable_chart --simulator --unit hour --unit-count 48', 'The last 48 hourly points of the stable-token chart'),
  handler: async (args) => {
    const def = getDataset(args.dataset);
    blockRangeArgs(args); // the flags' own checks first: they quote what was typed
    const doc: Record<string, unknown> = {
      name: `export-${args.dataset}`,
      network: args.network,
      target: args.simulator ? 'simulator' : 'api',
      range: {
        fromBlock: args['from-block'] ?? 0,
        ...(args['to-block'] !== undefined ? { toBlock: args['to-block'] } : {}),
        ...(args.head !== undefined ? { head: args.head } : {}),
      },
      datasets: { [args.dataset]: datasetSpecFromFlags(def, args) },
    };
    const job = jobFromFlags(doc, runOverrides(args, undefined));
    await executeJob(job, args);
  },
};
