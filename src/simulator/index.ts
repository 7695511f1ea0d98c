// The embedded simulator of the explorer and finance APIs: a deterministic synthetic chain behind one
// node:http server. See docs/simulator.md and docs/api-assumptions.md.

import { Chain, PRESETS } from './chain.js';
import { SimulatorExamples, computeExamples } from './examples.js';
import type { FaultKind, FaultOptions } from './faults.js';
import { SimServer, Stats } from './server.js';
import { DIALECTS, type Dialect } from './dialect.js';

export { DIALECTS, type Dialect } from './dialect.js';
import { sparseChainFor, type SparseChain, type SparseProfile } from './sparse.js';
import { checkReorg, withReorg, type ReorgOptions } from './finality.js';

export type { ReorgOptions } from './finality.js';

export type { FaultKind, FaultOptions } from './faults.js';
export type { SimulatorExamples } from './examples.js';

export const DEFAULT_API_KEY = 'chainlake-simulator-key';
export type Scale = 'small' | 'medium' | 'large';
export const SCALES: readonly Scale[] = ['small', 'medium', 'large'];
export const FAULT_KINDS: readonly FaultKind[] = ['429', 'throttle', '500', '502', '503', 'reset', 'stall', 'truncated', 'non-json'];

export interface SimulatorOptions {
  seed?: number;
  scale?: Scale;
  apiKey?: string;
  host?: string;
  port?: number;
  latencyMs?: { min: number; max: number } | number;
  faults?: FaultOptions;
  rateLimit?: { rps: number; burst?: number };
  blockTimeMs?: number;
  resultWindow?: number;
  /** `spec` (default) or `real`: the real services' behaviours where they differ from the spec (docs/simulator.md). */
  dialect?: Dialect;
  /** With `dialect: 'real'`: account and event-log listings ignore their block range filter (off by default). */
  ignoresRangeFilter?: boolean;
  /**
   * 'sparse': a chain of realistic height (head 53,450,000) whose activity is spread from genesis, sparse early
   * and dense late (see sparse.ts); it answers the head, blocks and the ERC-20 transfers of its addresses
   * (`sparseAddresses`). 'demo' (default): the small generated chain alone.
   */
  chain?: ChainKind;
  /** Off by default: the last blocks before `reorg.at` are an orphaned fork until the head passes it (finality.ts). */
  reorg?: ReorgOptions;
  /** Off by default: listings answer only the rows up to `head - indexLagBlocks` (an explorer index behind the head). */
  indexLagBlocks?: number;
}

export type ChainKind = 'demo' | 'sparse';
export const CHAIN_KINDS: readonly ChainKind[] = ['demo', 'sparse'];

export type SimulatorStats = Stats;

export interface RunningSimulator {
  urls: { mainnet: string; testnet: string; testnetAlt: string; finance: string };
  apiKey: string;
  examples: SimulatorExamples;
  /** With `chain: 'sparse'`: the tall chain's addresses on mainnet (a dense, a sparse and an empty scope). */
  sparseAddresses?: Record<SparseProfile, string>;
  /** Testnet counterparts of `examples` (the testnet is a different chain). */
  testnetExamples: SimulatorExamples;
  stats(): SimulatorStats;
  resetStats(): void;
  setFaults(f: FaultOptions | undefined): void;
  setLatency(l: SimulatorOptions['latencyMs']): void;
  setRateLimit(r: SimulatorOptions['rateLimit']): void;
  advanceHead(blocks: number, network?: 'mainnet' | 'testnet'): void;
  head(network?: 'mainnet' | 'testnet'): number;
  close(): Promise<void>;
}

// Chains are immutable apart from their head, so one process shares them between simulators of the same
// seed and scale (tests start many); each simulator keeps its own head.
const chainCache = new Map<string, Chain>();
/**
 * The chains kept, by their visible blocks (what their memory follows): many small ones, or one or two larger ones,
 * the most recently used first; the chain just made is kept whatever its size. A test fork runs file after file
 * (vitest.config.ts), and a count of chains regenerated small ones the next file asked for again
 * (docs/performance.md, "The test suite").
 */
const CACHED_BLOCKS = 480_000;
function getChain(network: 'mainnet' | 'testnet', seed: number, scale: Scale): Chain {
  const key = `${network}:${seed}:${scale}`;
  let c = chainCache.get(key);
  if (!c) {
    c = new Chain(network, seed, scale);
    chainCache.set(key, c);
    // Running simulators keep their chains alive: the cache only decides what outlives them.
    let blocks = 0;
    for (const kept of chainCache.values()) blocks += kept.preset.visibleBlocks;
    for (const [k, kept] of chainCache) {
      if (blocks <= CACHED_BLOCKS || k === key) break;
      chainCache.delete(k);
      blocks -= kept.preset.visibleBlocks;
    }
  } else {
    chainCache.delete(key);
    chainCache.set(key, c);
  }
  return c;
}

/** The shared chain of a seed and scale (for tests and tools that need the model itself; read-only). */
export function chainFor(seed: number, scale: Scale, network: 'mainnet' | 'testnet'): Chain {
  return getChain(network, seed, scale);
}

/** A view of a shared chain with its own head. */
function withOwnHead(c: Chain): Chain {
  const view = Object.create(c) as Chain;
  view.head = c.preset.visibleBlocks;
  return view;
}

/** The options checked, with their defaults. */
interface SimulatorSettings {
  seed: number;
  scale: Scale;
  resultWindow: number;
  dialect: Dialect;
  apiKey: string;
  host: string;
  reorg: ReorgOptions | undefined;
  indexLagBlocks: number | undefined;
  kind: ChainKind;
}

/** Each network's chain of a simulator, made on first use, with the simulator's own head. */
interface SimulatorChains {
  chains: Record<'mainnet' | 'testnet', Chain>;
  /** The head of a network, without making its chain for it (the testnet's is its preset's until made). */
  headOf(network: 'mainnet' | 'testnet'): number;
}

export async function startSimulator(opts: SimulatorOptions = {}): Promise<RunningSimulator> {
  const settings = checkedSettings(opts);
  const { chains, headOf } = simulatorChains(settings);
  const sparse =
    settings.kind === 'sparse' ? { mainnet: sparseChainFor(settings.seed, 'mainnet'), testnet: sparseChainFor(settings.seed, 'testnet') } : undefined;
  const server = new SimServer(chains, {
    apiKey: settings.apiKey,
    host: settings.host,
    port: opts.port ?? 0,
    resultWindow: settings.resultWindow,
    latencyMs: opts.latencyMs,
    faults: opts.faults,
    rateLimit: opts.rateLimit,
    dialect: settings.dialect,
    ignoresRangeFilter: opts.ignoresRangeFilter === true,
    sparse,
    headOf,
    indexLagBlocks: settings.indexLagBlocks,
  });
  const port = await server.listen();
  const hostPart = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  const root = `http://${hostPart}:${port}`;
  const examples = computeExamples(chains.mainnet);
  const timer = opts.blockTimeMs !== undefined && opts.blockTimeMs > 0 ? advanceHeads(chains, opts.blockTimeMs) : undefined;
  return runningSimulator({ root, apiKey: settings.apiKey, examples, chains, headOf, sparse, server, timer });
}

/** The options with their defaults, or a RangeError naming the first that is wrong (in the order listed here). */
function checkedSettings(opts: SimulatorOptions): SimulatorSettings {
  const seed = opts.seed ?? 1;
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new RangeError(`seed must be an integer in 0..4294967295, got ${seed}`);
  const scale = opts.scale ?? 'small';
  if (!SCALES.includes(scale)) throw new RangeError(`scale must be one of ${SCALES.join(', ')}, got '${String(scale)}'`);
  const resultWindow = opts.resultWindow ?? 10_000;
  if (!Number.isInteger(resultWindow) || resultWindow < 1) throw new RangeError(`resultWindow must be a positive integer, got ${resultWindow}`);
  const dialect = opts.dialect ?? 'spec';
  if (!DIALECTS.includes(dialect)) throw new RangeError(`dialect must be one of ${DIALECTS.join(', ')}, got '${String(dialect)}'`);
  if (opts.ignoresRangeFilter && dialect !== 'real') throw new RangeError("ignoresRangeFilter is a behaviour of the real dialect: set dialect 'real' too");
  const apiKey = opts.apiKey ?? DEFAULT_API_KEY;
  if (apiKey.length === 0) throw new RangeError('apiKey must not be empty');
  const host = opts.host ?? '127.0.0.1';
  const reorg = opts.reorg;
  if (reorg) checkReorg(reorg);
  const lag = opts.indexLagBlocks;
  if (lag !== undefined && (!Number.isSafeInteger(lag) || lag < 0)) throw new RangeError(`indexLagBlocks must be a non-negative integer, got ${lag}`);
  const kind = opts.chain ?? 'demo';
  if (!CHAIN_KINDS.includes(kind)) throw new RangeError(`chain must be one of ${CHAIN_KINDS.join(', ')}, got '${String(kind)}'`);
  return { seed, scale, resultWindow, dialect, apiKey, host, reorg, indexLagBlocks: lag, kind };
}

function simulatorChains({ seed, scale, reorg }: SimulatorSettings): SimulatorChains {
  // The testnet chain is made on first use: most runs never ask for it, and making it costs about a third of a
  // simulator's start (a test suite and a demo run start many).
  const made: Partial<Record<'mainnet' | 'testnet', Chain>> = {};
  const chainOf = (network: 'mainnet' | 'testnet'): Chain => {
    if (made[network]) return made[network];
    const view = withOwnHead(getChain(network, seed, scale));
    return (made[network] = reorg ? withReorg(view, reorg) : view);
  };
  const chains: Record<'mainnet' | 'testnet', Chain> = {
    get mainnet() {
      return chainOf('mainnet');
    },
    get testnet() {
      return chainOf('testnet');
    },
  };
  const headOf = (network: 'mainnet' | 'testnet'): number =>
    made[network]?.head ?? (network === 'mainnet' ? chains.mainnet.head : PRESETS.testnet.visibleBlocks);
  return { chains, headOf };
}

/** `blockTimeMs`: both heads advance one block each tick (the timer does not keep the process alive). */
function advanceHeads(chains: SimulatorChains['chains'], blockTimeMs: number): NodeJS.Timeout {
  const timer = setInterval(() => {
    chains.mainnet.setHead(chains.mainnet.head + 1);
    chains.testnet.setHead(chains.testnet.head + 1);
  }, blockTimeMs);
  timer.unref();
  return timer;
}

/** What a started simulator is made of, for the handle its user holds. */
interface StartedSimulator extends SimulatorChains {
  root: string;
  apiKey: string;
  examples: SimulatorExamples;
  sparse: { mainnet: SparseChain; testnet: SparseChain } | undefined;
  server: SimServer;
  timer: NodeJS.Timeout | undefined;
}

function runningSimulator({ root, apiKey, examples, chains, headOf, sparse, server, timer }: StartedSimulator): RunningSimulator {
  let testnetExamples: SimulatorExamples | undefined;
  return {
    urls: { mainnet: `${root}/mainnet`, testnet: `${root}/testnet`, testnetAlt: `${root}/testnet-alt`, finance: `${root}/finance` },
    apiKey,
    examples,
    get testnetExamples() {
      return (testnetExamples ??= computeExamples(chains.testnet));
    },
    sparseAddresses: sparse?.mainnet.addresses,
    stats: () => server.getStats(),
    resetStats: () => server.resetStats(),
    setFaults: (f) => server.setFaults(f),
    setLatency: (l) => server.setLatency(l),
    setRateLimit: (r) => server.setRateLimit(r),
    advanceHead: (blocks, network = 'mainnet') => {
      if (!Number.isInteger(blocks) || blocks < 0) throw new RangeError(`advanceHead needs a non-negative integer, got ${blocks}`);
      chains[network].setHead(chains[network].head + blocks);
    },
    head: (network = 'mainnet') => sparse?.[network].head ?? headOf(network),
    close: async () => {
      if (timer) clearInterval(timer);
      await server.close();
    },
  };
}
