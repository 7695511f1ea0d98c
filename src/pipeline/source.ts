/**
 * Where a job's data comes from, set up once for every caller (run, plan, stream, verify, enqueue, worker):
 * the job's targets (its API URLs and key, or the embedded simulator it starts), one transport (retry, rate
 * limit, the daily quota) and the clients of both APIs over it, closed together by one call. A caller that built
 * its own would drift from the others (a test transport option or the quota honoured by some only, a simulator
 * left listening), so none does.
 */
import { ExplorerClient } from '../extract/explorer.js';
import { FinanceClient } from '../extract/finance.js';
import type { QuotaGate } from '../extract/quota.js';
import { HttpTransport, type RetryEvent, type TransportOptions } from '../extract/transport.js';
import type { Clients } from './execute.js';
import type { JobSource } from './job.js';
import type { Logger } from './log.js';

/** An embedded simulator already running (tests), used instead of starting one for a job whose target is the simulator. */
export interface RunningTargets {
  urls: { mainnet: string; testnet: string; testnetAlt: string; finance: string };
  apiKey: string;
}

export interface SourceOptions {
  /** Reached when the embedded simulator is the target; a test may pass an already running one. */
  simulator?: RunningTargets;
  /** Overrides for tests: retry/timeouts of the transport, an observer of every attempt. */
  transport?: Partial<TransportOptions>;
  /**
   * A transport to use instead of a new HTTP one (the benchmark replays recorded pages through it, so the
   * rest of the run is measured without HTTP). Closing the source closes it.
   */
  transportInstance?: HttpTransport;
  /** Aborted on an interruption: a retry's wait ends and a request in flight is cancelled. */
  signal?: AbortSignal;
  /** The daily request quota every request of the source passes (a run's own, or a worker's shared one). */
  quota?: QuotaGate;
  /** Where a retry is told (`request.retry` lines), when the caller shows them. */
  log?: Logger;
}

export interface Targets {
  /** Absent when the job reads the finance API alone and names no explorer. */
  explorer?: string;
  explorerAlt?: string;
  finance?: string;
  apiKey?: string;
  close(): Promise<void>;
}

/** The transport and clients of one job, and the one call that releases them and the simulator it started. */
export interface Source {
  readonly targets: Targets;
  readonly transport: HttpTransport;
  readonly clients: Clients;
  close(): Promise<void>;
}

/** The HTTP settings a job's source asks for. */
export function transportOptionsOf(source: JobSource): TransportOptions {
  return { concurrency: source.concurrency, rps: source.rps, burst: source.burst, retry: source.retry, timeouts: source.timeouts };
}

/** The base URLs and key of the job's target; the embedded simulator is started here when the job names it. */
async function resolveTargets(source: JobSource, simulator: RunningTargets | undefined): Promise<Targets> {
  if (source.target.kind === 'api') {
    return {
      explorer: source.target.explorer,
      explorerAlt: source.target.explorerAlt,
      finance: source.target.finance,
      apiKey: source.apiKey,
      close: async () => {},
    };
  }
  if (simulator) {
    return {
      explorer: simulator.urls[source.network],
      explorerAlt: simulator.urls.testnetAlt,
      finance: simulator.urls.finance,
      apiKey: simulator.apiKey,
      close: async () => {},
    };
  }
  const { startSimulator } = await import('../simulator/index.js');
  const sim = await startSimulator({
    seed: source.target.seed,
    scale: source.target.scale,
    dialect: source.target.dialect,
    chain: source.target.chain,
    host: '127.0.0.1',
    port: 0,
  });
  return { explorer: sim.urls[source.network], explorerAlt: sim.urls.testnetAlt, finance: sim.urls.finance, apiKey: sim.apiKey, close: () => sim.close() };
}

/** The explorer client when an explorer base URL is known (it finds the head); the finance client likewise. */
function buildClients(transport: HttpTransport, targets: Targets, source: JobSource): Clients {
  return {
    explorer: targets.explorer
      ? new ExplorerClient(transport, { baseUrl: targets.explorer, altBaseUrl: targets.explorerAlt, apiKey: targets.apiKey, network: source.network })
      : undefined,
    finance: targets.finance ? new FinanceClient(transport, { baseUrl: targets.finance }) : undefined,
    paths: source.paths,
  };
}

/** A retry as one terminal line: `network failure (ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9)` -> `network failure (ECONNREFUSED)`. */
function retryLine(log: Logger): (e: RetryEvent) => void {
  return (e) =>
    log.log(
      'info',
      'request.retry',
      `retrying ${e.endpoint}: ${e.reason.replace(/\((E[A-Z]+)\b[^)]*\)/, '($1)')}, attempt ${e.attempt} of ${e.maxAttempts}, next in ${(e.delayMs / 1000).toFixed(1)} s`,
      { ...e, delayMs: Math.round(e.delayMs) },
    );
}

/** Targets -> transport -> clients for a job's `source`; `close()` releases all three (the simulator it started included). */
export async function openSource(source: JobSource, opts: SourceOptions = {}): Promise<Source> {
  const targets = await resolveTargets(source, opts.simulator);
  let transport: HttpTransport;
  try {
    transport =
      opts.transportInstance ??
      new HttpTransport({
        ...transportOptionsOf(source),
        ...(opts.log ? { onRetry: retryLine(opts.log) } : {}),
        ...(opts.signal ? { signal: opts.signal } : {}),
        ...opts.transport,
      });
  } catch (e) {
    await targets.close();
    throw e;
  }
  if (opts.quota) transport.quota = opts.quota;
  const clients = buildClients(transport, targets, source);
  let closed: Promise<void> | undefined;
  return {
    targets,
    transport,
    clients,
    close() {
      closed ??= (async () => {
        try {
          await transport.close();
        } finally {
          await targets.close();
        }
      })();
      return closed;
    },
  };
}
