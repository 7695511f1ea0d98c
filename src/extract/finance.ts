import type { Accounting } from './accounting.js';
import { ShapeError, type ApiCaller, type CheckedBody, type Query } from './endpoint.js';
import type { ListScan } from './scan.js';
import { buildUrl } from './explorer.js';
import { EnvelopeFailure, type HttpTransport } from './transport.js';

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

export type ChartUnit = 'minute' | 'hour' | 'day';

export interface ChartQuery {
  unit: ChartUnit;
  /** How many points. */
  unitCount: number;
  /** How many units per point. */
  unitMultiplier: number;
}

/** Finance records as sent: numbers and strings, nested period objects (`24h`, `7d`, `1m`, `1y`). */
export type FinanceRecord = Record<string, unknown>;

function need(ok: boolean, what: string): void {
  if (!ok) throw new RangeError(what);
}

/**
 * The finance analytics API over the shared transport (same rate limit, retries and accounting as the
 * explorer). No credential is shown by the spec, so none is sent; every request says `accept: application/json`.
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
  getBody(endpoint: string, path: string, query: Query, acct: Accounting, _host?: 'main' | 'alt', scan?: ListScan): Promise<CheckedBody> {
    return this.transport.call(
      { endpoint, url: buildUrl(this.config.baseUrl, path, query), method: 'GET', headers: { accept: 'application/json' } },
      (body, bytes, list) => ({ results: checkFinanceEnvelope(body), bytes, resultsAt: [], list }),
      acct,
      scan,
    );
  }

  post(endpoint: string): Promise<unknown> {
    return Promise.reject(new Error(`${endpoint}: the finance API has no POST endpoint`));
  }

  private async data(label: string, path: string, query: Query, acct: Accounting): Promise<unknown> {
    const env = (await this.get(label, path, query, acct)) as Record<string, unknown>;
    return env.data;
  }

  private async list(label: string, path: string, query: Query, acct: Accounting): Promise<FinanceRecord[]> {
    const d = await this.data(label, path, query, acct);
    if (!Array.isArray(d)) throw new ShapeError(label, path, `data is ${JSON.stringify(d)?.slice(0, 60)}, expected a list`);
    return d as FinanceRecord[];
  }

  private async object(label: string, path: string, query: Query, acct: Accounting): Promise<FinanceRecord> {
    const d = await this.data(label, path, query, acct);
    if (d === null || typeof d !== 'object' || Array.isArray(d))
      throw new ShapeError(label, path, `data is ${JSON.stringify(d)?.slice(0, 60)}, expected an object`);
    return d as FinanceRecord;
  }

  /** GET /stablecoin/total_chart: `data.history[]` of price, volume and supply points. */
  async stableChart(q: ChartQuery, acct: Accounting): Promise<FinanceRecord[]> {
    need(['minute', 'hour', 'day'].includes(q.unit), `finance total_chart: unit must be minute, hour or day, got ${JSON.stringify(q.unit)}`);
    need(Number.isSafeInteger(q.unitCount) && q.unitCount > 0, `finance total_chart: unitCount must be a positive integer, got ${q.unitCount}`);
    need(
      Number.isSafeInteger(q.unitMultiplier) && q.unitMultiplier > 0,
      `finance total_chart: unitMultiplier must be a positive integer, got ${q.unitMultiplier}`,
    );
    const d = await this.object(
      'finance /stablecoin/total_chart',
      '/stablecoin/total_chart',
      { unit: q.unit, unit_count: q.unitCount, unit_multiplier: q.unitMultiplier },
      acct,
    );
    if (!Array.isArray(d.history)) throw new ShapeError('finance /stablecoin/total_chart', '/stablecoin/total_chart', 'data.history is not a list');
    return d.history as FinanceRecord[];
  }

  /** GET /staking/info_list: the staking pool `pid` (0 or 1 in the spec). */
  async stakingInfo(pid: number, acct: Accounting): Promise<FinanceRecord[]> {
    need(Number.isSafeInteger(pid) && pid >= 0, `finance info_list: pid must be a non-negative integer, got ${pid}`);
    return this.list('finance /staking/info_list', '/staking/info_list', { pid }, acct);
  }

  /** GET /staking/getRewardInfo: `_staking_reward` (wei strings) and `staking_reward` (coin numbers), at a block or the latest. */
  async stakingRewards(blockNumber: number | undefined, acct: Accounting): Promise<FinanceRecord> {
    need(
      blockNumber === undefined || (Number.isSafeInteger(blockNumber) && blockNumber >= 0),
      `finance getRewardInfo: block_number must be a block number, got ${blockNumber}`,
    );
    return this.object('finance /staking/getRewardInfo', '/staking/getRewardInfo', { block_number: blockNumber }, acct);
  }

  /** GET /dashboard/overview. */
  async dashboard(acct: Accounting): Promise<FinanceRecord> {
    return this.object('finance /dashboard/overview', '/dashboard/overview', {}, acct);
  }

  /** GET /pool/info_list: figures of one pool contract. */
  async poolInfo(pool: string, acct: Accounting): Promise<FinanceRecord[]> {
    need(typeof pool === 'string' && /^0x[0-9a-fA-F]{40}$/.test(pool), `finance pool info_list: pool must be an address, got ${JSON.stringify(pool)}`);
    return this.list('finance /pool/info_list', '/pool/info_list', { pool }, acct);
  }
}
