import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { get } from './helpers.js';

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator();
});
afterAll(async () => {
  await sim.close();
});

const fin = (p: string, accept = 'application/json') => get(sim.urls.finance + p, { accept });
const isNum = (v: unknown): boolean => typeof v === 'number' && Number.isFinite(v);
const PERIODS = ['24h', '7d', '1m', '1y'];

function expectSuccess(r: { status: number; json: any }): any {
  expect(r.status).toBe(200);
  expect(r.json.type).toBe('success');
  expect(typeof r.json.message).toBe('string');
  return r.json.data;
}

describe('GET /stablecoin/total_chart', () => {
  it('returns unit_count typed points spaced unit x multiplier apart', async () => {
    for (const [unit, ms] of [
      ['minute', 60_000],
      ['hour', 3_600_000],
      ['day', 86_400_000],
    ] as const) {
      const d = expectSuccess(await fin(`/stablecoin/total_chart?unit=${unit}&unit_count=12&unit_multiplier=2`));
      const h = d.history;
      expect(h).toHaveLength(12);
      for (const p of h) {
        expect(Object.keys(p)).toEqual(['timestamp', 'price', 'dateTime', 'volume', 'total_supply']);
        expect(isNum(p.timestamp)).toBe(true);
        expect(p.timestamp).toBeGreaterThan(1e12); // milliseconds
        expect(typeof p.price).toBe('string');
        expect(Number(p.price)).toBeGreaterThan(0.99);
        expect(typeof p.dateTime).toBe('string');
        expect(isNum(p.volume)).toBe(true);
        expect(isNum(p.total_supply)).toBe(true);
      }
      for (let i = 1; i < h.length; i++) expect(h[i].timestamp - h[i - 1].timestamp).toBe(2 * ms);
    }
  });

  it('a coarse point equals the sum of the fine points it covers', async () => {
    const day = expectSuccess(await fin('/stablecoin/total_chart?unit=day&unit_count=1&unit_multiplier=1')).history[0];
    const hours = expectSuccess(await fin('/stablecoin/total_chart?unit=hour&unit_count=24&unit_multiplier=1')).history;
    expect(hours[0].timestamp).toBe(day.timestamp);
    expect(Math.round(hours.reduce((s: number, p: any) => s + Math.round(p.volume * 100), 0))).toBe(Math.round(day.volume * 100));
  });

  it('validates its required parameters', async () => {
    for (const [qs, msg] of [
      ['unit_count=2&unit_multiplier=1', /unit/],
      ['unit=week&unit_count=2&unit_multiplier=1', /unit/],
      ['unit=day&unit_multiplier=1', /unit_count/],
      ['unit=day&unit_count=2', /unit_multiplier/],
      ['unit=day&unit_count=0&unit_multiplier=1', /unit_count/],
      ['unit=day&unit_count=x&unit_multiplier=1', /unit_count/],
      ['unit=day&unit_count=1000&unit_multiplier=1000', /span/],
    ] as [string, RegExp][]) {
      const r = await fin(`/stablecoin/total_chart?${qs}`);
      expect(r.status, qs).toBe(400);
      expect(r.json).toMatchObject({ type: 'failure', data: null });
      expect(r.json.message).toMatch(msg);
    }
  });
});

describe('staking', () => {
  it('info_list entries are typed and agree with getRewardInfo', async () => {
    const reward = expectSuccess(await fin('/staking/getRewardInfo'));
    expect(Object.keys(reward)).toEqual(['_staking_reward', 'staking_reward']);
    const keys = ['totalStakedGrand', 'totalRewardGrand', 'totalStakedLiquid', 'totalRewardLiquid'];
    for (const k of keys) {
      expect(reward._staking_reward[k]).toMatch(/^[0-9]+$/);
      expect(isNum(reward.staking_reward[k])).toBe(true);
      expect(BigInt(reward._staking_reward[k])).toBe(BigInt(Math.round(reward.staking_reward[k] * 1e6)) * 10n ** 12n);
    }
    for (const pid of [0, 1]) {
      const d = expectSuccess(await fin(`/staking/info_list?pid=${pid}`));
      expect(d).toHaveLength(1);
      const e = d[0];
      expect(Object.keys(e)).toEqual([...PERIODS, 'pid', 'liquidity', 'reward_amount', 'reward_liquidityWD', 'updated_at']);
      for (const p of PERIODS) {
        expect(Object.keys(e[p])).toEqual(['liquidity_change', 'reward_amount_change', 'reward_liquidityWD_change']);
        for (const v of Object.values(e[p])) expect(isNum(v)).toBe(true);
      }
      expect(e.pid).toBe(String(pid));
      expect(e.updated_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(e.liquidity).toBe(reward.staking_reward[pid === 0 ? 'totalStakedGrand' : 'totalStakedLiquid']);
      expect(e.reward_amount).toBe(reward.staking_reward[pid === 0 ? 'totalRewardGrand' : 'totalRewardLiquid']);
    }
    const old = expectSuccess(await fin('/staking/getRewardInfo?block_number=100'));
    expect(old.staking_reward.totalRewardGrand).toBeLessThan(reward.staking_reward.totalRewardGrand);
    expect((await fin(`/staking/getRewardInfo?block_number=${sim.head() + 1}`)).status).toBe(404);
    expect((await fin('/staking/info_list?pid=7')).status).toBe(404);
    expect((await fin('/staking/info_list')).status).toBe(400);
    expect((await fin('/staking/info_list?pid=one')).status).toBe(400);
  });
});

describe('dashboard and pools', () => {
  it('figures agree: pools sum to the dashboard, which matches the chart', async () => {
    const d = expectSuccess(await fin('/dashboard/overview'));
    expect(Object.keys(d)).toEqual(['1m', '1y', '7d', '24h', 'tvl', 'acc_user', 'total_volume', 'total_swap_number', 'total_swap_volume', 'updated_at']);
    expect(Object.keys(d['7d'])).toEqual(['volume', 'pool_apr', 'staking_apr', 'volume_change', 'liquidity_change']);
    expect(Object.keys(d['24h'])).toEqual(['fee', 'volume', 'fee_change', 'volume_change', 'liquidity_change']);
    for (const p of ['1m', '1y']) expect(Object.keys(d[p])).toEqual(['volume', 'volume_change', 'liquidity_change']);
    for (const p of PERIODS) for (const v of Object.values(d[p])) expect(isNum(v)).toBe(true);
    expect(typeof d.acc_user).toBe('string');
    expect(typeof d.total_swap_number).toBe('string');
    for (const k of ['tvl', 'total_volume', 'total_swap_volume']) expect(isNum(d[k])).toBe(true);
    const hours = expectSuccess(await fin('/stablecoin/total_chart?unit=hour&unit_count=24&unit_multiplier=1')).history;
    const chart24 = hours.reduce((s: number, p: any) => s + Math.round(p.volume * 100), 0);
    expect(Math.round(d['24h'].volume * 100)).toBe(chart24);
    let pools24 = 0,
      pools7 = 0;
    for (const pool of sim.examples.pools) {
      const e = expectSuccess(await fin(`/pool/info_list?pool=${pool}`))[0];
      expect(Object.keys(e)).toEqual(['1m', '1y', '7d', '24h', 'liquidity', 'pool_address', 'updated_at']);
      expect(Object.keys(e['7d'])).toEqual(['apr', 'volume', 'apr_change', 'volume_change', 'liquidity_change']);
      expect(Object.keys(e['24h'])).toEqual(['volume', 'swap_volume', 'volume_change', 'liquidity_change', 'swap_volume_change']);
      for (const p of PERIODS) {
        expect(typeof e[p].volume).toBe('string');
        for (const [k, v] of Object.entries(e[p])) if (k !== 'volume' && k !== 'swap_volume') expect(isNum(v), k).toBe(true);
      }
      expect(e.pool_address.toLowerCase()).toBe(pool);
      expect(isNum(e.liquidity)).toBe(true);
      pools24 += Math.round(Number(e['24h'].volume) * 100);
      pools7 += Math.round(Number(e['7d'].volume) * 100);
    }
    expect(pools24).toBe(chart24);
    expect(pools7).toBe(Math.round(d['7d'].volume * 100));
  });

  it('rejects unknown pools, bad input, unknown paths and non-JSON accept headers', async () => {
    expect((await fin('/pool/info_list')).status).toBe(400);
    expect((await fin('/pool/info_list?pool=0x12')).status).toBe(400);
    const unknown = await fin(`/pool/info_list?pool=${sim.examples.whale}`);
    expect(unknown.status).toBe(404);
    expect(unknown.json).toMatchObject({ type: 'failure', data: null });
    expect((await fin('/nothing/here')).status).toBe(404);
    const html = await fin('/dashboard/overview', 'text/html');
    expect(html.status).toBe(406);
    expect(html.json.type).toBe('failure');
    expect((await fin('/dashboard/overview', '*/*')).status).toBe(200);
  });

  it('needs no api key and is deterministic', async () => {
    const a = await get(sim.urls.finance + '/dashboard/overview');
    const other = await startSimulator();
    try {
      const b = await get(other.urls.finance + '/dashboard/overview');
      expect(b.text).toBe(a.text);
      const seeded = await startSimulator({ seed: 2 });
      try {
        expect((await get(seeded.urls.finance + '/dashboard/overview')).text).not.toBe(a.text);
      } finally {
        await seeded.close();
      }
    } finally {
      await other.close();
    }
  });
});
