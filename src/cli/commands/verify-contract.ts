import { readFile } from 'node:fs/promises';
import type { CommandModule } from 'yargs';
import { Accounting } from '../../extract/accounting.js';
import { CONTRACT_VERIFY, ExplorerClient } from '../../extract/explorer.js';
import { HttpTransport } from '../../extract/transport.js';
import { ENDPOINT_ENV, addressProblem } from '../../pipeline/job.js';
import { CliError, EXIT } from '../exit-codes.js';

interface Args {
  address: string;
  source: string;
  name: string;
  compiler: string;
  runs: number;
  optimize: boolean;
  'constructor-args'?: string;
  libraries?: string;
  network: 'mainnet' | 'testnet';
  simulator?: boolean;
  format: 'text' | 'json';
}

/**
 * The address, runs and libraries checked and the source read, before anything is sent: a mistyped address is the
 * user's to fix (exit 2), as `export` says.
 */
async function checkedInput(args: Args): Promise<{ libraries: unknown[] | undefined; source: string }> {
  const bad = addressProblem(args.address);
  if (bad) throw new CliError(`verify-contract <address>: ${bad}`, 'CHAINLAKE_USAGE', "give the contract's address: 0x and 40 hex digits");
  if (!Number.isInteger(args.runs) || args.runs < 0)
    throw new CliError(
      `--runs ${args.runs}: the optimizer's runs must be a whole number, 0 or more`,
      'CHAINLAKE_USAGE',
      'give the runs the contract was compiled with (solc --optimize-runs; 200 by default)',
    );
  let libraries: unknown[] | undefined;
  if (args.libraries !== undefined) {
    try {
      libraries = JSON.parse(args.libraries) as unknown[];
    } catch {
      libraries = undefined;
    }
    if (!Array.isArray(libraries)) throw new CliError(`--libraries must be a JSON array, got ${args.libraries}`);
  }
  let source: string;
  try {
    source = await readFile(args.source, 'utf8');
  } catch (e) {
    throw new CliError(`--source: cannot read ${args.source} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  if (source.length === 0)
    throw new CliError(`--source ${args.source} is empty: there is no source to verify`, 'CHAINLAKE_USAGE', "name the contract's Solidity source file");
  return { libraries, source };
}

/** The API's verdict as a line of text or one JSON object. */
function verdict(args: Args, verified: boolean, message: string | undefined): string {
  const address = args.address.toLowerCase();
  if (args.format === 'json') return `${JSON.stringify({ address, name: args.name, network: args.network, verified, message: message ?? null })}\n`;
  // The API's reason when it refuses; its success word (OK) says nothing the verdict does not.
  const reason = message && !/^ok$/i.test(message.trim()) ? `: ${message}` : '';
  return verified ? `verified: ${address} (${args.name})\n` : `not verified: the API did not accept the source of ${address} as ${args.name}${reason}\n`;
}

/** Submits a contract's source for verification (`contract_verify`). Exit 0 when verified, 1 when the API says no. */
export const verifyContractCommand: CommandModule<object, Args> = {
  command: 'verify-contract <address>',
  describe: `Submit a contract source for verification (explorer ${CONTRACT_VERIFY.method} ${CONTRACT_VERIFY.path}, endpoint ${CONTRACT_VERIFY.id}); exit 0 if verified, 1 if not`,
  builder: (y) =>
    y
      .positional('address', { type: 'string', demandOption: true, describe: 'Contract address' })
      .option('source', { type: 'string', demandOption: true, describe: 'Source file (sent base64-encoded)' })
      .option('name', { type: 'string', demandOption: true, describe: 'Contract name, as declared in the source' })
      .option('compiler', { type: 'string', demandOption: true, describe: 'Compiler version, e.g. v0.8.24+commit.e11b9ed9' })
      .option('runs', { type: 'number', default: 200, describe: 'Optimizer runs' })
      .option('optimize', { type: 'boolean', default: true, describe: 'Optimization enabled (--no-optimize to disable)' })
      .option('constructor-args', { type: 'string', describe: 'ABI-encoded constructor arguments (hex)' })
      .option('libraries', { type: 'string', describe: 'Libraries as a JSON array' })
      .option('network', { choices: ['mainnet', 'testnet'] as const, default: 'mainnet' as const })
      .option('simulator', { type: 'boolean', describe: 'Target the embedded simulator instead of CHAINLAKE_*_URL' })
      .option('format', {
        choices: ['text', 'json'] as const,
        default: 'text' as const,
        describe: 'A line of text, or one JSON object: {"address","name","network","verified","message"}',
      })
      .example('$0 verify-contract 0xabc… --source Token.sol --name Token --compiler v0.8.24+commit.e11b9ed9', 'Verify a contract on mainnet'),
  handler: async (args) => {
    const { libraries, source } = await checkedInput(args);
    const sim = args.simulator ? await (await import('../../simulator/index.js')).startSimulator({}) : undefined;
    const baseUrl = sim ? sim.urls[args.network] : process.env[ENDPOINT_ENV[args.network]];
    if (!baseUrl) throw new CliError(`no ${args.network} base URL: set ${ENDPOINT_ENV[args.network]} (or use --simulator)`);
    const transport = new HttpTransport({ concurrency: 1 });
    try {
      const client = new ExplorerClient(transport, { baseUrl, apiKey: sim ? sim.apiKey : process.env.CHAINLAKE_API_KEY || undefined, network: args.network });
      const { verified, message } = await client.verifyContractOutcome(
        args.address,
        {
          contractName: args.name,
          compiler: args.compiler,
          runsOptimizer: args.runs,
          optimizationEnabled: args.optimize,
          source,
          constructorArguments: args['constructor-args'],
          libraries,
        },
        new Accounting(),
      );
      process.stdout.write(verdict(args, verified, message));
      process.exitCode = verified ? EXIT.ok : EXIT.windowsFailed;
    } finally {
      await transport.close();
      await sim?.close();
    }
  },
};
