import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { CommandModule } from 'yargs';
import type { Network } from '../../datasets/dataset.js';
import { describeDecoded } from '../../decode/datasets.js';
import { decodeExistingLake, skippedText } from '../../decode/lake.js';
import { parseDecodeSpec, resolveDatasets, STANDARD_CHOICES, type DecodeSpec } from '../../decode/spec.js';
import { decodeDistributedLake } from '../../distributed/decode.js';
import { openDistributedLake } from '../../distributed/read.js';
import { openEngine } from '../../load/engine.js';
import { literal } from '../../load/sql.js';
import { LakePaths } from '../../load/paths.js';
import { loadJobDocument } from '../../pipeline/job.js';
import { CliError } from '../exit-codes.js';
import { lakeNamedBy } from '../common.js';
import { DEFAULT_LAKE, resolveLakeTarget, withLakeOptions } from '../lake-target.js';
import { makeScratch } from '../../load/scratch.js';

interface Args {
  lake?: string;
  catalog?: string;
  store?: string;
  network?: Network;
  job?: string;
  standard?: string[];
  tokens?: string[];
  contract?: string[];
  name?: string;
  abiFile?: string;
  signature?: string[];
  event?: string[];
  describe: boolean;
  format: 'text' | 'json';
}

/** The spec the options (or the job's `decode` key) give. */
async function specOf(args: Args): Promise<{ spec: DecodeSpec; jobLake?: string; network: Network }> {
  const fail = (where: string, problem: string): never => {
    throw new CliError(`${where}: ${problem}`);
  };
  if (args.job) {
    const { job, doc } = await loadJobDocument(args.job, process.env);
    if (!job.what.decode && !args.standard && !args.contract) throw new CliError(`${args.job}: the job has no "decode" key; give --standard or --contract`);
    const own = args.standard || args.contract ? await specOf({ ...args, job: undefined }) : undefined;
    return { spec: own?.spec ?? job.what.decode!, jobLake: lakeNamedBy(doc), network: args.network ?? job.what.network };
  }
  if ((args.name || args.abiFile || args.signature || args.event) && (args.contract?.length ?? 0) !== 1)
    throw new CliError('--name, --abi-file, --signature and --event apply to one --contract (name several contracts in a job file\'s "decode" key)');
  const doc = {
    ...(args.standard ? { standard: args.standard } : {}),
    ...(args.tokens ? { tokens: args.tokens } : {}),
    ...(args.contract
      ? {
          contracts: args.contract.map((address) => ({
            address,
            ...(args.name ? { name: args.name } : {}),
            ...(args.abiFile ? { abiFile: args.abiFile } : {}),
            ...(args.signature ? { signatures: args.signature } : {}),
            ...(args.event ? { events: args.event } : {}),
          })),
        }
      : {}),
  };
  return { spec: parseDecodeSpec(doc, 'decode options', fail, process.cwd()), network: args.network ?? 'mainnet' };
}

export const decodeCommand: CommandModule<object, Args> = {
  command: 'decode',
  describe: 'Decode the event logs of a lake already written into typed datasets (standard token events, any ABI event)',
  builder: (y) =>
    withLakeOptions(y, { distributed: true, lakeDescribe: 'Lake directory (default: the job’s, else $CHAINLAKE_LAKE, else data/lake)' })
      .option('network', { choices: ['mainnet', 'testnet'] as const, describe: 'Network whose logs to decode (default: the job’s, else mainnet)' })
      .option('job', { type: 'string', describe: 'Decode what this job file’s "decode" key names' })
      .option('standard', {
        type: 'string',
        array: true,
        choices: STANDARD_CHOICES,
        describe: 'Standard token events: erc20, erc721, erc1155 (or one decoded dataset)',
      })
      .option('tokens', { type: 'string', array: true, describe: 'Standard events only of these token contracts' })
      .option('contract', {
        type: 'string',
        array: true,
        describe: 'Decode this contract’s events (ABI from the lake’s contracts dataset unless --abi-file or --signature)',
      })
      .option('name', { type: 'string', describe: 'Names the contract’s datasets <name>_<event> (default: its verified name)' })
      .option('abi-file', { type: 'string', describe: 'The contract’s ABI as a JSON file' })
      .option('signature', { type: 'string', array: true, describe: 'An event signature, e.g. "Swap(address indexed sender, uint256 amount0In)"' })
      .option('event', { type: 'string', array: true, describe: 'Only these events of the ABI' })
      .option('describe', { type: 'boolean', default: false, describe: 'Only show the datasets (columns, types, docs); write nothing' })
      .option('format', { choices: ['text', 'json'] as const, default: 'text' as const })
      .example('$0 decode --standard erc20 erc721', 'Decode every Transfer/Approval log of data/lake')
      .example(
        '$0 decode --contract 0x… --name pair --signature "Swap(address indexed sender, uint256 amount0In, uint256 amount1In, uint256 amount0Out, uint256 amount1Out, address indexed to)"',
        'One event from its signature',
      )
      .example('$0 decode --job jobs/demo.json', 'What a job’s "decode" key names, over everything its lake holds')
      .example(
        '$0 decode --catalog postgres://chainlake@db/lake --standard erc20',
        'Decode a distributed lake’s event logs, as one snapshot under the committer lease',
      ),
  handler: async (args) => {
    const { spec, jobLake, network } = await specOf(args);
    const needsLake = !args.describe || spec.contracts.some((c) => !c.abiFile && !c.signatures);
    const target = resolveLakeTarget(args, { jobLake });
    // A spec's problems are DecodeSpecErrors (exit 2 by their code); anything else keeps its own code.
    const resolve = (opts: Omit<Parameters<typeof resolveDatasets>[1], 'network'>) => resolveDatasets(spec, { ...opts, network });
    const show = (datasets: Awaited<ReturnType<typeof resolveDatasets>>): void => {
      process.stdout.write(args.format === 'json' ? JSON.stringify(datasets, null, 2) + '\n' : datasets.map(describeDecoded).join('\n\n') + '\n');
    };
    let datasets: Awaited<ReturnType<typeof resolveDatasets>>;
    let r: Awaited<ReturnType<typeof decodeExistingLake>>;
    if (target.kind === 'distributed' && needsLake) {
      // A contract's ABI from the distributed lake's contracts dataset, as the local lake's below.
      const fromLake = spec.contracts.some((c) => !c.abiFile && !c.signatures);
      const lake = fromLake
        ? await openDistributedLake({ catalog: target.catalog, store: target.store, storeConnection: target.storeConnection, datasets: ['contracts'] })
        : undefined;
      try {
        const contracts =
          lake && lake.tables.includes('contracts') ? { conn: lake.conn, relation: `SELECT * FROM contracts WHERE network = ${literal(network)}` } : undefined;
        datasets = await resolve(contracts ? { contracts } : {});
      } finally {
        lake?.close();
      }
      if (args.describe) return show(datasets);
      r = await decodeDistributedLake({ catalog: target.catalog, store: target.store, storeConnection: target.storeConnection, network, datasets });
    } else {
      const lake = needsLake && target.kind === 'local' ? target.lake : DEFAULT_LAKE;
      const paths = new LakePaths(lake);
      if (needsLake && !existsSync(paths.catalog)) throw new CliError(`no lake at ${paths.root}: ${paths.catalog} does not exist (run a job first)`);
      // Reading the contracts dataset's files needs no lock: an engine of its own, in a temp folder.
      const tmp = await makeScratch(args.describe ? 'describe' : 'decode');
      const engine = await openEngine({ tempDir: tmp });
      try {
        datasets = await resolve({ engine, paths });
      } finally {
        engine.close();
        await rm(tmp, { recursive: true, force: true });
      }
      if (args.describe) return show(datasets);
      r = await decodeExistingLake(paths, network, datasets);
    }
    if (args.format === 'json') {
      process.stdout.write(JSON.stringify(r, null, 2) + '\n');
      return;
    }
    process.stdout.write(
      `decoded ${r.logs} event logs of ${network} into ${r.files} partition files (run ${r.runId}):\n` +
        r.datasets.map((d) => `  ${d.name.padEnd(32)} ${String(d.rows).padStart(9)} rows in ${d.partitions} partitions`).join('\n') +
        `\n  ${'_rejects'.padEnd(32)} ${String(r.rejects).padStart(9)} logs that fit no asked event (see SELECT * FROM _rejects)\n` +
        (r.skipped.length ? `  ${skippedText(r.skipped)}\n` : ''),
    );
  },
};
