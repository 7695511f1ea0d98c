import type { Accounting } from './accounting.js';
import { EnvelopeFailure, type HttpTransport } from './transport.js';

export type QueryValue = string | number | boolean | undefined;
export type Query = Record<string, QueryValue>;

export interface ExplorerConfig {
  /** Base URL of the network, e.g. https://host/api (paths start with /v1 below it). */
  baseUrl: string;
  /** Testnet only: the other host that serves internal transactions by transaction hash (#13). */
  altBaseUrl?: string;
  apiKey?: string;
}

/** The explorer's success envelope carries the text of the HTTP success code. */
export const EXPLORER_SUCCESS = '200';

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

/** The explorer API over the shared transport. Endpoint-specific helpers build on `get`/`post`. */
export class ExplorerClient {
  constructor(
    private readonly transport: HttpTransport,
    private readonly config: ExplorerConfig,
  ) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { accept: 'application/json', ...extra };
    if (this.config.apiKey) h['api-key'] = this.config.apiKey;
    return h;
  }

  /** GET an explorer path; returns the envelope's `results`. `host: 'alt'` uses the testnet alternate host. */
  get(endpoint: string, path: string, query: Query, acct: Accounting, host: 'main' | 'alt' = 'main'): Promise<unknown> {
    const base = host === 'alt' ? (this.config.altBaseUrl ?? this.config.baseUrl) : this.config.baseUrl;
    return this.transport.call({ endpoint, url: buildUrl(base, path, query), method: 'GET', headers: this.headers() }, checkExplorerEnvelope, acct);
  }

  post(endpoint: string, path: string, body: unknown, acct: Accounting): Promise<unknown> {
    return this.transport.call(
      {
        endpoint,
        url: buildUrl(this.config.baseUrl, path),
        method: 'POST',
        headers: this.headers({ 'content-type': 'application/json' }),
        body: JSON.stringify(body),
      },
      checkExplorerEnvelope,
      acct,
    );
  }

  /**
   * The chain head, pinned at run start so that windows end at or below it and new blocks cannot shift
   * offsets while we page. Uses `GET /v1/blocks/latest` (see docs/api-assumptions.md).
   */
  async head(acct: Accounting): Promise<number> {
    const results = await this.get('explorer #17 (latest)', '/v1/blocks/latest', {}, acct);
    const data = (results as { data?: { block_number?: unknown } } | null)?.data;
    const n = Number(data?.block_number);
    if (!Number.isSafeInteger(n) || n < 0) {
      throw new Error(`explorer #17 (latest): the head block number is not an integer: ${JSON.stringify(data?.block_number)}`);
    }
    return n;
  }
}
