// Finance analytics API over a deterministic market model tied to the mainnet head's time. Every figure is
// derived from integer per-minute series (cents, micro-coins), so sums agree exactly across endpoints:
// dashboard volume = sum of the pools' volumes = sum of the matching total_chart points; tvl = pools + staking;
// staking info = reward info at the same block.

import { A_POOL0, BLOCK_SECONDS, Chain, N_POOLS } from './chain.js';
import { isAddress } from './hex.js';
import { ApiError } from './params.js';
import { hash2 } from './rng.js';

export interface FinanceResponse {
  status: number;
  body: string;
  rows: number;
  route: string;
}

export function financeFailure(status: number, message: string, route = 'unknown'): FinanceResponse {
  return { status, body: JSON.stringify({ type: 'failure', message, data: null }), rows: 0, route };
}
function ok(route: string, data: unknown, rows: number): FinanceResponse {
  return { status: 200, body: JSON.stringify({ type: 'success', message: 'Success', data }), rows, route };
}

const MINUTE_KEY = 0x0f1a4ce;
const PLATFORM_START_MIN = Math.floor(Date.UTC(2023, 0, 1) / 60_000);
const MAX_SPAN_MINUTES = 2_000_000;
const POOL_WEIGHTS = [0.46, 0.27, 0.17]; // last pool takes the remainder
const POOL_LIQ_WEIGHTS = [0.41, 0.29, 0.18, 0.12];
const round2 = (x: number): number => Math.round(x * 100) / 100;
const round6 = (x: number): number => Math.round(x * 1e6) / 1e6;
const cents = (c: number): number => c / 100;

/** Platform swap volume of one minute, in cents. */
function minuteCents(seed: number, m: number): number {
  const h = hash2(seed ^ MINUTE_KEY, m >>> 0);
  const hourOfDay = Math.floor(m / 60) % 24;
  const daily = 60 + 40 * Math.sin((hourOfDay / 24) * 2 * Math.PI); // busier part of the day
  const trend = 1 + 0.3 * Math.sin(m / 43_200); // slow monthly swings
  return Math.floor(((h % 100_000) * daily * trend) / 100) + 5_000;
}
function minuteSwaps(seed: number, m: number): number {
  return 1 + (hash2(seed ^ 0x5aa9, m >>> 0) % 20);
}
function priceAt(seed: number, m: number): string {
  return (0.999 + (hash2(seed ^ 0x9e1ce, m >>> 0) % 21) / 10_000).toFixed(4);
}
function supplyAt(m: number): number {
  return 48_000_000 + 37 * (m - PLATFORM_START_MIN) + (m % 997);
}

class Series {
  private hourCache = new Map<number, number>();
  private cum: number[] = [0]; // cumulative cents of whole hours since platform start
  private cumSwaps: number[] = [0];
  constructor(readonly seed: number) {}
  hourCents(h: number): number {
    let v = this.hourCache.get(h);
    if (v === undefined) {
      v = 0;
      for (let m = h * 60; m < h * 60 + 60; m++) v += minuteCents(this.seed, m);
      if (this.hourCache.size > 100_000) this.hourCache.clear();
      this.hourCache.set(h, v);
    }
    return v;
  }
  /** Cents over [fromMin, toMin), using whole hours where possible. */
  rangeCents(fromMin: number, toMin: number): number {
    let s = 0,
      m = fromMin;
    while (m < toMin && m % 60 !== 0) s += minuteCents(this.seed, m++);
    while (m + 60 <= toMin) {
      s += this.hourCents(m / 60);
      m += 60;
    }
    while (m < toMin) s += minuteCents(this.seed, m++);
    return s;
  }
  /** Cumulative cents and swaps over whole hours from the platform start up to hour h (exclusive). */
  totals(h: number): { cents: number; swaps: number } {
    const start = PLATFORM_START_MIN / 60;
    while (this.cum.length <= h - start) {
      const hh = start + this.cum.length - 1;
      this.cum.push(this.cum[this.cum.length - 1]! + this.hourCents(hh));
      let sw = 0;
      for (let m = hh * 60; m < hh * 60 + 60; m++) sw += minuteSwaps(this.seed, m);
      this.cumSwaps.push(this.cumSwaps[this.cumSwaps.length - 1]! + sw);
    }
    const i = Math.max(0, h - start);
    return { cents: this.cum[i]!, swaps: this.cumSwaps[i]! };
  }
}
const seriesBySeed = new Map<number, Series>();
function series(c: Chain): Series {
  let s = seriesBySeed.get(c.seed);
  if (!s) {
    s = new Series(c.seed);
    seriesBySeed.set(c.seed, s);
  }
  return s;
}

const nowMinute = (c: Chain, head: number): number => Math.floor(c.blockSeconds(head) / 60);
const isoMs = (c: Chain, head: number): string => new Date(c.blockSeconds(head) * 1000).toISOString();

/** Liquidity (cents) of the platform at an hour. */
function liquidityCents(seed: number, h: number): number {
  return Math.floor(2_500_000_000 + 120_000_000 * Math.sin(h / 97) + (hash2(seed ^ 0x11, h >>> 0) % 20_000_000));
}
function poolLiquidityCents(seed: number, h: number, p: number): number {
  return Math.floor(liquidityCents(seed, h) * POOL_LIQ_WEIGHTS[p]!);
}
function poolShare(cents_: number, p: number): number {
  if (p < N_POOLS - 1) return Math.floor(cents_ * POOL_WEIGHTS[p]!);
  let rest = cents_;
  for (let i = 0; i < N_POOLS - 1; i++) rest -= Math.floor(cents_ * POOL_WEIGHTS[i]!);
  return rest;
}

const PERIOD_HOURS: Record<'24h' | '7d' | '1m' | '1y', number> = { '24h': 24, '7d': 168, '1m': 720, '1y': 8760 };
const pct = (now: number, before: number): number => (before === 0 ? 0 : round2(((now - before) / before) * 100));

// ---- staking (micro-coins, tied to blocks) -------------------------------------------------------------

function stakedMicro(seed: number, pid: number, block: number): number {
  const base = pid === 0 ? 7_500_000_000_000 : 2_100_000_000_000;
  return base + block * (pid === 0 ? 41_000 : 13_000) + (hash2(seed ^ (0x57a0 + pid), Math.floor(block / 300) >>> 0) % 900_000_000);
}
function rewardMicro(pid: number, block: number): number {
  return (pid === 0 ? 410_000_000_000_000 : 125_000_000_000_000) + block * (pid === 0 ? 520_000 : 170_000);
}
const GRND_PRICE = 0.4213; // stable tokens per reward token
const micro = (v: number): number => round6(v / 1e6);
const weiOf = (v: number): string => (v === 0 ? '0' : String(v) + '000000000000');

function stakingEntry(c: Chain, head: number, pid: number): Record<string, unknown> {
  const e: Record<string, unknown> = {};
  for (const [k, hours] of Object.entries(PERIOD_HOURS)) {
    const past = head - Math.round((hours * 3600) / BLOCK_SECONDS); // the staking contract predates this chain's window
    const dl = stakedMicro(c.seed, pid, head) - stakedMicro(c.seed, pid, past);
    const dr = rewardMicro(pid, head) - rewardMicro(pid, past);
    e[k] = { liquidity_change: micro(dl), reward_amount_change: micro(dr), reward_liquidityWD_change: round6(micro(dr) * GRND_PRICE) };
  }
  const reward = micro(rewardMicro(pid, head));
  Object.assign(e, {
    pid: String(pid),
    liquidity: micro(stakedMicro(c.seed, pid, head)),
    reward_amount: reward,
    reward_liquidityWD: round6(reward * GRND_PRICE),
    updated_at: isoMs(c, head),
  });
  return e;
}

// ---- handlers ------------------------------------------------------------------------------------------

function intParam(q: URLSearchParams, name: string, required: boolean, min: number, max: number): number | null {
  const v = q.get(name);
  if (v === null || v === '') {
    if (required) throw new ApiError(400, `Missing required parameter '${name}'`);
    return null;
  }
  if (!/^[0-9]+$/.test(v) || Number(v) < min || Number(v) > max)
    throw new ApiError(400, `Invalid ${name} '${v.slice(0, 40)}': must be an integer from ${min} to ${max}`);
  return Number(v);
}

function totalChart(c: Chain, q: URLSearchParams): FinanceResponse {
  const unit = q.get('unit');
  if (unit === null || unit === '') throw new ApiError(400, "Missing required parameter 'unit' (minute, hour or day)");
  const unitMin = ({ minute: 1, hour: 60, day: 1440 } as Record<string, number>)[unit.toLowerCase()];
  if (unitMin === undefined) throw new ApiError(400, `Invalid unit '${unit.slice(0, 40)}': must be minute, hour or day`);
  const count = intParam(q, 'unit_count', true, 1, 1000)!;
  const mult = intParam(q, 'unit_multiplier', true, 1, 1000)!;
  const bucket = unitMin * mult;
  if (bucket * count > MAX_SPAN_MINUTES)
    throw new ApiError(400, `Requested span of ${bucket * count} minutes exceeds the maximum of ${MAX_SPAN_MINUTES} (unit_count x unit_multiplier x unit)`);
  const s = series(c);
  const end = Math.floor(nowMinute(c, c.head) / bucket) * bucket;
  const history = [];
  for (let i = count; i >= 1; i--) {
    const start = end - i * bucket;
    const last = start + bucket - 1;
    history.push({
      timestamp: start * 60_000,
      price: priceAt(c.seed, last),
      dateTime: new Date(start * 60_000).toISOString().replace('T', ' ').slice(0, 19),
      volume: cents(s.rangeCents(start, start + bucket)),
      total_supply: supplyAt(last),
    });
  }
  return ok('stablecoin/total_chart', { history }, history.length);
}

function stakingInfo(c: Chain, q: URLSearchParams): FinanceResponse {
  const pid = intParam(q, 'pid', true, 0, 1_000_000)!;
  if (pid > 1) throw new ApiError(404, `Unknown pid ${pid}: staking pools are 0 and 1`);
  return ok('staking/info_list', [stakingEntry(c, c.head, pid)], 1);
}

function rewardInfo(c: Chain, q: URLSearchParams): FinanceResponse {
  const b = intParam(q, 'block_number', false, 0, 1e15) ?? c.head;
  if (b > c.head) throw new ApiError(404, `Block ${b} not found: the latest block is ${c.head}`);
  const sg = stakedMicro(c.seed, 0, b),
    rg = rewardMicro(0, b),
    sl = stakedMicro(c.seed, 1, b),
    rl = rewardMicro(1, b);
  return ok(
    'staking/getRewardInfo',
    {
      _staking_reward: { totalStakedGrand: weiOf(sg), totalRewardGrand: weiOf(rg), totalStakedLiquid: weiOf(sl), totalRewardLiquid: weiOf(rl) },
      staking_reward: { totalStakedGrand: micro(sg), totalRewardGrand: micro(rg), totalStakedLiquid: micro(sl), totalRewardLiquid: micro(rl) },
    },
    1,
  );
}

interface Window {
  now: number;
  prev: number;
  liqNow: number;
  liqBefore: number;
}
function windows(c: Chain, pool: number | null): Record<string, Window> {
  const s = series(c);
  const endH = Math.floor(nowMinute(c, c.head) / 60);
  const out: Record<string, Window> = {};
  const liq = (h: number): number => (pool === null ? liquidityCents(c.seed, h) : poolLiquidityCents(c.seed, h, pool));
  for (const [k, hours] of Object.entries(PERIOD_HOURS)) {
    const nowC = s.rangeCents((endH - hours) * 60, endH * 60);
    const prevC = s.rangeCents((endH - 2 * hours) * 60, (endH - hours) * 60);
    out[k] = {
      now: pool === null ? nowC : poolShare(nowC, pool),
      prev: pool === null ? prevC : poolShare(prevC, pool),
      liqNow: liq(endH),
      liqBefore: liq(endH - hours),
    };
  }
  return out;
}

function dashboard(c: Chain): FinanceResponse {
  const w = windows(c, null);
  const endH = Math.floor(nowMinute(c, c.head) / 60);
  const totals = series(c).totals(endH);
  const stakingCents = Math.round((micro(stakedMicro(c.seed, 0, c.head)) + micro(stakedMicro(c.seed, 1, c.head))) * GRND_PRICE * 100);
  let poolsLiq = 0;
  for (let p = 0; p < N_POOLS; p++) poolsLiq += poolLiquidityCents(c.seed, endH, p);
  const fee = (x: number): number => Math.floor(x * 0.003);
  const w7 = w['7d']!,
    w24 = w['24h']!;
  const poolApr = round2(((fee(w7.now) * 52) / w7.liqNow) * 100);
  const stakingApr = round2(
    (((rewardMicro(0, c.head) - rewardMicro(0, Math.max(0, c.head - 50_400))) * 52 * GRND_PRICE) / (stakedMicro(c.seed, 0, c.head) * GRND_PRICE)) * 100,
  );
  const period = (k: string): { volume: number; volume_change: number; liquidity_change: number } => ({
    volume: cents(w[k]!.now),
    volume_change: pct(w[k]!.now, w[k]!.prev),
    liquidity_change: pct(w[k]!.liqNow, w[k]!.liqBefore),
  });
  const data = {
    '1m': period('1m'),
    '1y': period('1y'),
    '7d': {
      volume: cents(w7.now),
      pool_apr: poolApr,
      staking_apr: stakingApr,
      volume_change: pct(w7.now, w7.prev),
      liquidity_change: pct(w7.liqNow, w7.liqBefore),
    },
    '24h': {
      fee: cents(fee(w24.now)),
      volume: cents(w24.now),
      fee_change: pct(fee(w24.now), fee(w24.prev)),
      volume_change: pct(w24.now, w24.prev),
      liquidity_change: pct(w24.liqNow, w24.liqBefore),
    },
    tvl: cents(poolsLiq + stakingCents),
    acc_user: String(118_000 + Math.floor((endH - PLATFORM_START_MIN / 60) * 3.7)),
    total_volume: cents(totals.cents),
    total_swap_number: String(totals.swaps),
    total_swap_volume: cents(totals.cents),
    updated_at: isoMs(c, c.head),
  };
  return ok('dashboard/overview', data, 1);
}

function poolInfo(c: Chain, q: URLSearchParams): FinanceResponse {
  const raw = q.get('pool');
  if (raw === null || raw === '') throw new ApiError(400, "Missing required parameter 'pool' (a pool contract address)");
  if (!isAddress(raw)) throw new ApiError(400, `Invalid pool '${raw.slice(0, 80)}': expected a 0x-prefixed 20-byte hex address`);
  const i = c.findAddress(raw);
  if (i < A_POOL0 || i >= A_POOL0 + N_POOLS) throw new ApiError(404, `Unknown pool ${raw}`);
  const p = i - A_POOL0;
  const w = windows(c, p);
  const str = (x: number): string => cents(x).toFixed(2);
  const swapShare = (x: number): number => Math.floor(x * 0.92);
  const apr = (k: string): number => round2(((Math.floor(w[k]!.now * 0.003) * (8760 / PERIOD_HOURS[k as '7d'])) / w[k]!.liqNow) * 100);
  const aprPrev = (k: string): number => round2(((Math.floor(w[k]!.prev * 0.003) * (8760 / PERIOD_HOURS[k as '7d'])) / w[k]!.liqBefore) * 100);
  const period = (k: string): { volume: string; volume_change: number; liquidity_change: number } => ({
    volume: str(w[k]!.now),
    volume_change: pct(w[k]!.now, w[k]!.prev),
    liquidity_change: pct(w[k]!.liqNow, w[k]!.liqBefore),
  });
  const w24 = w['24h']!,
    w7 = w['7d']!;
  const endH = Math.floor(nowMinute(c, c.head) / 60);
  const data = [
    {
      '1m': period('1m'),
      '1y': period('1y'),
      '7d': {
        apr: apr('7d'),
        volume: str(w7.now),
        apr_change: round2(apr('7d') - aprPrev('7d')),
        volume_change: pct(w7.now, w7.prev),
        liquidity_change: pct(w7.liqNow, w7.liqBefore),
      },
      '24h': {
        volume: str(w24.now),
        swap_volume: str(swapShare(w24.now)),
        volume_change: pct(w24.now, w24.prev),
        liquidity_change: pct(w24.liqNow, w24.liqBefore),
        swap_volume_change: pct(swapShare(w24.now), swapShare(w24.prev)),
      },
      liquidity: cents(poolLiquidityCents(c.seed, endH, p)),
      pool_address: c.addrCase(i, 1),
      updated_at: isoMs(c, c.head),
    },
  ];
  return ok('pool/info_list', data, 1);
}

const FINANCE_ROUTES: Record<string, (c: Chain, q: URLSearchParams) => FinanceResponse> = {
  'stablecoin/total_chart': totalChart,
  'staking/info_list': stakingInfo,
  'staking/getRewardInfo': rewardInfo,
  'dashboard/overview': (c) => dashboard(c),
  'pool/info_list': poolInfo,
};

export function handleFinance(chain: Chain, method: string, segs: string[], q: URLSearchParams): FinanceResponse {
  const path = segs.join('/');
  const h = FINANCE_ROUTES[path];
  if (!h) return financeFailure(404, `Unknown path ${method} /finance/${path}`);
  if (method !== 'GET') return financeFailure(405, `Method ${method} not allowed on /finance/${path}; use GET`, path);
  try {
    return h(chain, q);
  } catch (e) {
    if (e instanceof ApiError) return financeFailure(e.status, e.message, path);
    throw e;
  }
}
