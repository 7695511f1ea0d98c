import type { Network } from '../datasets/dataset.js';
import { ChainlakeError } from '../errors.js';
import type { Accounting } from './accounting.js';
import { ShapeError, type ApiCaller, type CheckedBody, type Query } from './endpoint.js';
import type { RequestRecord } from './request-log.js';
import type { ListScan } from './scan.js';
import { EnvelopeFailure, type HttpTransport } from './transport.js';

export type { Query, QueryValue } from './endpoint.js';

export interface ExplorerConfig {
  /** Base URL of the network, e.g. https://host/api (paths start with /v1 below it). */
  baseUrl: string;
  /** Testnet only: the other host that serves internal transactions by transaction hash (#13). */
  altBaseUrl?: string;
  apiKey?: string;
  /** The network this client talks to: on testnet, #13 goes to `altBaseUrl`. */
  network?: Network;
}

/** The explorer's success envelope carries the text of the HTTP success code. */
export const EXPLORER_SUCCESS = '200';

/** Where an explorer envelope keeps what `get` returns. */
const EXPLORER_RESULTS_AT = ['results'] as const;

/**
 * Success is HTTP 200 and an envelope whose `status` is the success code. A throttle or server-error status
 * inside an HTTP 200 is transient; any other status is the API refusing the call.
 */
export function checkExplorerEnvelope(body: unknown): unknown {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new EnvelopeFailure('transient', undefined, 'the body is not an envelope object');
  }
  const { status, message, results } = body as Record<string, unknown>;
  const text = typeof message === 'string' ? message : '';
  if (status === EXPLORER_SUCCESS) {
    if (results === undefined) throw new EnvelopeFailure('terminal', String(status), 'success envelope without results');
    return results;
  }
  const code = typeof status === 'string' ? status : JSON.stringify(status);
  if (code === '429' || /rate limit|too many requests|throttl/i.test(text)) throw new EnvelopeFailure('transient', code, text, true);
  if (/^5\d\d$/.test(code ?? '')) throw new EnvelopeFailure('transient', code, text);
  throw new EnvelopeFailure('terminal', code, text || 'the envelope reports a failure');
}

export function buildUrl(baseUrl: string, path: string, query: Query = {}): URL {
  const url = new URL(baseUrl.replace(/\/+$/, '') + path);
  for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, String(v));
  return url;
}

export interface VerifyRequest {
  contractName: string;
  compiler: string;
  runsOptimizer: number;
  optimizationEnabled: boolean;
  source: string;
  constructorArguments?: string;
  libraries?: unknown[];
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/**
 * The one explorer endpoint no dataset reads (the spec's #16): its id names it in messages, retry lines and
 * `describe --endpoints`, as a dataset endpoint's id does.
 */
export const CONTRACT_VERIFY = { id: 'contract_verify', api: 'explorer', method: 'POST', path: '/v1/contracts/{address}/verify' } as const;

function need(ok: boolean, what: string): void {
  if (!ok) throw new RangeError(what);
}

/**
 * The explorer API over the shared transport: generic `get`/`post`, which the dataset fetcher drives from the
 * dataset declarations (src/datasets/: the one place an endpoint's path, query and entries are described).
 * The one typed method is `verifyContract`: a write, which no dataset declares.
 */
export class ExplorerClient implements ApiCaller {
  constructor(
    private readonly transport: HttpTransport,
    private readonly config: ExplorerConfig,
  ) {}

  get network(): Network | undefined {
    return this.config.network;
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { accept: 'application/json', ...extra };
    if (this.config.apiKey) h['api-key'] = this.config.apiKey;
    return h;
  }

  /** GET an explorer path; returns the envelope's `results`. `host: 'alt'` uses the testnet alternate host. */
  async get(endpoint: string, path: string, query: Query, acct: Accounting, host: 'main' | 'alt' = 'main'): Promise<unknown> {
    return (await this.getBody(endpoint, path, query, acct, host)).results;
  }

  /** As `get`, with the body's bytes (and, asked for with `scan`, the list at `scan.at` below `results`). */
  getBody(
    endpoint: string,
    path: string,
    query: Query,
    acct: Accounting,
    host: 'main' | 'alt' = 'main',
    scan?: ListScan,
    record?: RequestRecord,
  ): Promise<CheckedBody> {
    if (host === 'alt' && !this.config.altBaseUrl) {
      // A setting a person adds, not a failure a re-run overcomes (a distributed worker takes it for a setup problem).
      // The job's check does not ask for this host, which only #13's windows on testnet need: they fail, naming it.
      return Promise.reject(
        new ChainlakeError(
          `${endpoint}: this call is served by the testnet alternate host, and no alternate base URL is configured (endpoints.testnetAlt or CHAINLAKE_TESTNET_ALT_URL)`,
          {
            code: 'CHAINLAKE_USAGE',
            hint: 'set the testnet\'s alternate explorer URL in the job\'s "endpoints.testnetAlt" or in CHAINLAKE_TESTNET_ALT_URL',
          },
        ),
      );
    }
    const base = host === 'alt' ? this.config.altBaseUrl! : this.config.baseUrl;
    return this.transport.call(
      { endpoint, url: buildUrl(base, path, query), method: 'GET', headers: this.headers(), record },
      (body, bytes, list) => ({
        results: checkExplorerEnvelope(body),
        bytes,
        resultsAt: EXPLORER_RESULTS_AT,
        list,
        message: typeof (body as { message?: unknown }).message === 'string' ? (body as { message: string }).message : undefined,
      }),
      acct,
      scan && { ...scan, at: [...EXPLORER_RESULTS_AT, ...scan.at] },
    );
  }

  post(endpoint: string, path: string, body: unknown, acct: Accounting, record?: RequestRecord): Promise<unknown> {
    return this.transport.call(
      {
        endpoint,
        url: buildUrl(this.config.baseUrl, path),
        method: 'POST',
        headers: this.headers({ 'content-type': 'application/json' }),
        body: JSON.stringify(body),
        record,
      },
      checkExplorerEnvelope,
      acct,
    );
  }

  private static address(v: string, what: string): string {
    need(typeof v === 'string' && ADDRESS.test(v), `${what} must be an address (0x + 40 hex digits), got ${JSON.stringify(v)}`);
    return v;
  }

  /** {@link CONTRACT_VERIFY} (the spec's #16): true when the API verified the source (results 1). */
  async verifyContract(address: string, req: VerifyRequest, acct: Accounting): Promise<boolean> {
    return (await this.verifyContractOutcome(address, req, acct)).verified;
  }

  /**
   * As verifyContract, with the envelope's `message`: when the API refuses, its own reason (which a person
   * needs to fix the submission), where it gives one.
   */
  async verifyContractOutcome(address: string, req: VerifyRequest, acct: Accounting): Promise<{ verified: boolean; message?: string }> {
    const id = CONTRACT_VERIFY.id;
    const a = encodeURIComponent(ExplorerClient.address(address, `${id}: contract address`));
    need(typeof req.source === 'string' && req.source.length > 0, `${id}: the contract source must be non-empty text`);
    need(Number.isInteger(req.runsOptimizer) && req.runsOptimizer >= 0, `${id}: runsOptimizer must be a non-negative integer, got ${req.runsOptimizer}`);
    const body = {
      contract_name: req.contractName,
      compiler: req.compiler,
      runs_optimizer: req.runsOptimizer,
      optimization_enabled: req.optimizationEnabled ? 1 : 0,
      contract_source: Buffer.from(req.source, 'utf8').toString('base64'),
      constructor_arguments: req.constructorArguments ?? '',
      libraries: req.libraries ?? [],
    };
    const { results: r, message } = await this.transport.call(
      {
        endpoint: id,
        url: buildUrl(this.config.baseUrl, `/v1/contracts/${a}/verify`),
        method: 'POST',
        headers: this.headers({ 'content-type': 'application/json' }),
        body: JSON.stringify(body),
      },
      (envelope) => ({
        results: checkExplorerEnvelope(envelope),
        message: typeof (envelope as { message?: unknown }).message === 'string' ? (envelope as { message: string }).message : undefined,
      }),
      acct,
    );
    if (r === 1 || r === '1') return { verified: true, message };
    if (r === 0 || r === '0') return { verified: false, message };
    throw new ShapeError(id, `/v1/contracts/${a}/verify`, `results is ${JSON.stringify(r)?.slice(0, 60)}, expected 0 or 1`);
  }
}
