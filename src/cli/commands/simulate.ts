// `chainlake simulate`: serve the embedded simulator of both APIs until SIGINT/SIGTERM.

import { writeFile } from 'node:fs/promises';
import type { Argv, CommandModule } from 'yargs';
import { chainFor, DEFAULT_API_KEY, DIALECTS, FAULT_KINDS, SCALES, startSimulator } from '../../simulator/index.js';
import { genesisFile } from '../../simulator/genesis.js';
import type { Dialect, FaultKind, Scale, SimulatorOptions } from '../../simulator/index.js';
import { CliError } from '../exit-codes.js';

interface SimulateArgs {
  'write-genesis'?: string;
  port: number;
  host: string;
  seed: number;
  scale: string;
  chain: string;
  'api-key'?: string;
  'latency-ms'?: string;
  'fault-rate': number;
  faults?: string;
  'rate-limit'?: number;
  'block-time-ms': number;
  'result-window': number;
  dialect: string;
}

export function parseLatency(v: string | undefined): SimulatorOptions['latencyMs'] {
  if (v === undefined || v === '') return undefined;
  const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(v);
  if (!m) throw new CliError(`--latency-ms: expected N or MIN-MAX milliseconds, got '${v}'`);
  if (m[2] === undefined) return Number(m[1]);
  const min = Number(m[1]),
    max = Number(m[2]);
  if (max < min) throw new CliError(`--latency-ms: MIN must not exceed MAX, got '${v}'`);
  return { min, max };
}

export function parseFaultKinds(v: string | undefined): FaultKind[] | undefined {
  if (v === undefined || v.trim() === '') return undefined;
  const kinds = v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  for (const k of kinds) {
    if (!(FAULT_KINDS as readonly string[]).includes(k)) throw new CliError(`--faults: unknown fault kind '${k}'; known kinds: ${FAULT_KINDS.join(', ')}`);
  }
  return kinds as FaultKind[];
}

export const simulateCommand: CommandModule<object, SimulateArgs> = {
  command: 'simulate',
  describe: 'Serve the embedded explorer + finance API simulator (deterministic synthetic chain) until interrupted',
  builder: (y: Argv<object>) =>
    y
      .option('port', { type: 'number', default: 0, describe: 'TCP port (0 picks a free one)' })
      .option('host', { type: 'string', default: '127.0.0.1', describe: 'Interface to listen on' })
      .option('seed', { type: 'number', default: 1, describe: 'Seed of the synthetic chain; same seed, same bytes' })
      .option('scale', {
        type: 'string',
        choices: SCALES as unknown as string[],
        default: 'small',
        describe: 'Chain size: small (~0.3M txs, whale ~110k), medium (~1M), large (~2.7M, whale >1.1M)',
      })
      .option('chain', {
        type: 'string',
        choices: ['demo', 'sparse'],
        default: 'demo',
        describe:
          'demo: the small generated chain; sparse: also a chain of realistic height (head 53,450,000, activity from genesis) for the ERC-20 transfers of its own addresses (printed as sparseAddresses)',
      })
      .option('api-key', { type: 'string', describe: `Required api-key header value (default: the built-in simulator key, or CHAINLAKE_API_KEY)` })
      .option('latency-ms', { type: 'string', describe: 'Added latency per request: N, or MIN-MAX for a skewed random spread' })
      .option('fault-rate', { type: 'number', default: 0, describe: 'Share of requests (0..1) that get a fault' })
      .option('faults', { type: 'string', describe: `Comma list of fault kinds: ${FAULT_KINDS.join(', ')} (default: all but stall)` })
      .option('rate-limit', { type: 'number', describe: 'Server-side limit in requests per second per api key (429 + Retry-After above it)' })
      .option('block-time-ms', { type: 'number', default: 0, describe: 'Reveal one new block every N ms (0 = frozen head)' })
      .option('write-genesis', {
        type: 'string',
        describe: 'Write the chains’ genesis allocations (for chainlake reconcile --genesis) to this file and exit, serving nothing',
      })
      .option('result-window', { type: 'number', default: 10_000, describe: 'Maximum offset + limit of a listing' })
      .option('dialect', {
        type: 'string',
        choices: DIALECTS as unknown as string[],
        default: 'spec',
        describe: 'spec: the API specs; real: what the real services do where they differ (docs/simulator.md)',
      })
      .example('$0 simulate', 'Serve on a free port; prints one JSON line with the base URLs and example addresses')
      .example('$0 simulate --port 8545 --scale medium --block-time-ms 12000', 'A bigger chain with a moving head')
      .example('$0 simulate --dialect real', 'Behave as the real services do: unverified contracts as empty successes, no blocks/latest...')
      .example('$0 simulate --chain sparse', "A chain at the real testnet's height, sparse early and dense late (quota and paging tests)")
      .example('$0 simulate --fault-rate 0.1 --faults 429,503,reset --latency-ms 5-80', 'Flaky, slow service for resilience tests')
      .check((a) => {
        if (!Number.isInteger(a.port) || a.port < 0 || a.port > 65535) throw new CliError(`--port must be an integer 0..65535, got ${a.port}`);
        if (!Number.isInteger(a.seed) || a.seed < 0 || a.seed > 0xffffffff) throw new CliError(`--seed must be an integer 0..4294967295, got ${a.seed}`);
        if (!(a['fault-rate'] >= 0 && a['fault-rate'] <= 1)) throw new CliError(`--fault-rate must be within 0..1, got ${a['fault-rate']}`);
        if (a['rate-limit'] !== undefined && !(a['rate-limit'] > 0)) throw new CliError(`--rate-limit must be > 0, got ${a['rate-limit']}`);
        if (!(a['block-time-ms'] >= 0)) throw new CliError(`--block-time-ms must be >= 0, got ${a['block-time-ms']}`);
        if (!Number.isInteger(a['result-window']) || a['result-window'] < 1)
          throw new CliError(`--result-window must be a positive integer, got ${a['result-window']}`);
        parseLatency(a['latency-ms']);
        parseFaultKinds(a.faults);
        return true;
      }),
  handler: async (a) => {
    if (a['write-genesis'] !== undefined) {
      const scale = a.scale as Scale;
      const file = a['write-genesis'];
      await writeFile(file, genesisFile(chainFor(a.seed, scale, 'mainnet'), chainFor(a.seed, scale, 'testnet'))).catch((e: NodeJS.ErrnoException) => {
        throw new CliError(`--write-genesis: cannot write ${file} (${e.code ?? e.message})`, 'CHAINLAKE_USAGE', 'give a path in a folder you can write');
      });
      process.stdout.write(`wrote the genesis allocations of seed ${a.seed}, scale ${scale} (mainnet and testnet) to ${file}\n`);
      return;
    }
    const kinds = parseFaultKinds(a.faults);
    const sim = await startSimulator({
      port: a.port,
      host: a.host,
      seed: a.seed,
      scale: a.scale as Scale,
      chain: a.chain as 'demo' | 'sparse',
      apiKey: a['api-key'] ?? process.env['CHAINLAKE_API_KEY'] ?? DEFAULT_API_KEY,
      latencyMs: parseLatency(a['latency-ms']),
      faults: a['fault-rate'] > 0 ? { rate: a['fault-rate'], kinds, seed: a.seed } : undefined,
      rateLimit: a['rate-limit'] !== undefined ? { rps: a['rate-limit'] } : undefined,
      blockTimeMs: a['block-time-ms'] > 0 ? a['block-time-ms'] : undefined,
      resultWindow: a['result-window'],
      dialect: a.dialect as Dialect,
    }).catch((e: unknown) => {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL')
        throw new CliError(`cannot listen on ${a.host}:${a.port} (${code}): choose another --port (0 picks a free one) or --host`);
      throw e;
    });
    // Handlers first: whoever reads the line below may signal at once.
    const stopped = new Promise<void>((resolve) => {
      const stop = (): void => {
        process.off('SIGINT', stop);
        process.off('SIGTERM', stop);
        sim.close().then(resolve, resolve);
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
    });
    process.stdout.write(
      JSON.stringify({
        mainnet: sim.urls.mainnet,
        testnet: sim.urls.testnet,
        testnetAlt: sim.urls.testnetAlt,
        finance: sim.urls.finance,
        apiKey: sim.apiKey,
        examples: sim.examples,
        ...(sim.sparseAddresses ? { sparseAddresses: sim.sparseAddresses } : {}),
      }) + '\n',
    );
    await stopped;
    process.exitCode = 0;
  },
};
