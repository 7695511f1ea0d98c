import type { Accounting } from './accounting.js';
import { type ApiCaller, type CheckedBody, type Query } from './endpoint.js';
import type { RequestRecord } from './request-log.js';
import type { ListScan } from './scan.js';
import { buildUrl } from './explorer.js';
import { EnvelopeFailure, type HttpTransport } from './transport.js';
import { bugError } from '../errors.js';

export interface FinanceConfig {
  /** Base URL of the finance API (its paths have no version segment). */
  baseUrl: string;
}

const THROTTLE = /rate limit|too many requests|throttl/i;
/** Server trouble reported inside an HTTP 200: worth another attempt. */
const SERVER_TROUBLE = /internal server error|bad gateway|temporarily unavailable|service unavailable|gateway timeout|try again/i;

/**
 * Success is HTTP 200 and an envelope whose `type` is `success` (any letter case) with a `data` member. Any
 * other `type` is a failure: a throttle or server trouble is transient, anything else terminal. The whole
 * envelope is returned, so declarations locate entries as `data…` exactly as explorer ones do in `results`.
 */
export function checkFinanceEnvelope(body: unknown): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new EnvelopeFailure('transient', undefined, 'the body is not an envelope object');
  }
  const env = body as Record<string, unknown>;
  const type = typeof env.type === 'string' ? env.type : JSON.stringify(env.type);
  const text = typeof env.message === 'string' ? env.message : '';
  if (typeof env.type === 'string' && env.type.toLowerCase() === 'success') {
    if (env.data === undefined || env.data === null) throw new EnvelopeFailure('terminal', type, 'success envelope without data');
    return env;
  }
  if (THROTTLE.test(text) || THROTTLE.test(type ?? '')) throw new EnvelopeFailure('transient', type, text, true);
  if (SERVER_TROUBLE.test(text)) throw new EnvelopeFailure('transient', type, text);
  throw new EnvelopeFailure('terminal', type, text || 'the envelope reports a failure');
}

/**
 * The finance analytics API over the shared transport (same rate limit, retries and accounting as the
 * explorer), driven by the dataset declarations like the explorer client. No credential is shown by the spec, so none is sent; every request says `accept: application/json`.
 */
export class FinanceClient implements ApiCaller {
  constructor(
    private readonly transport: HttpTransport,
    private readonly config: FinanceConfig,
  ) {}

  /** GET a finance path; returns the whole success envelope (`type`, `message`, `data`). */
  async get(endpoint: string, path: string, query: Query, acct: Accounting): Promise<unknown> {
    return (await this.getBody(endpoint, path, query, acct)).results;
  }

  /** As `get`, with the body's bytes (and, asked for with `scan`, the list at `scan.at`). */
  getBody(
    endpoint: string,
    path: string,
    query: Query,
    acct: Accounting,
    _host?: 'main' | 'alt',
    scan?: ListScan,
    record?: RequestRecord,
  ): Promise<CheckedBody> {
    return this.transport.call(
      { endpoint, url: buildUrl(this.config.baseUrl, path, query), method: 'GET', headers: { accept: 'application/json' }, record },
      (body, bytes, list) => ({ results: checkFinanceEnvelope(body), bytes, resultsAt: [], list }),
      acct,
      scan,
    );
  }

  post(endpoint: string): Promise<unknown> {
    return Promise.reject(bugError(`${endpoint}: the finance API has no POST endpoint, and a finance endpoint is declared as one`));
  }
}
