import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getDataset } from '../../src/datasets/registry.js';
import { parseJob } from '../../src/pipeline/job.js';
import type { RunReport } from '../../src/pipeline/report.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator, type SimulatorExamples } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { expectDeclaredTypes, financeData, lower } from './helpers.js';

/** The finance datasets: no api-key, `accept: application/json`, `type`/`message`/`data` envelope. */
let sim: RunningSimulator;
let ex: SimulatorExamples;
let lake: string;
let cleanup: () => Promise<void>;
let report: RunReport;
const PERIODS = ['24h', '7d', '1m', '1y'];

beforeAll(async () => {
  sim = await startSimulator({ seed: 9 });
  ex = sim.examples;
  ({ dir: lake, cleanup } = await tempDir());
  const job = parseJob(
    {
      name: 'finance',
      target: 'simulator',
      lake,
      concurrency: 4,
      datasets: {
        stable_chart: {
          charts: [
            { unit: 'hour', unit_count: 72, unit_multiplier: 1 },
            { unit: 'day', unit_count: 5, unit_multiplier: 1 },
          ],
        },
        staking_info: { pids: ex.pids },
        staking_rewards: { blocks: [1000, sim.head()] },
        dashboard: {},
        pool_info: { pools: ex.pools },
      },
    },
    'finance-test',
    process.env,
  );
  report = await runJob(job, { simulator: sim });
});

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

describe('finance datasets round trip', () => {
  it('the run completes without rejects or unknown fields', () => {
    expect(report.errors).toEqual([]);
    expect(report.status).toBe('complete');
    expect(report.totals.rejects).toBe(0);
    expect(report.unknownFields).toEqual({});
  });

  it('stable_chart: one row per (unit, multiplier, point), partitioned by the point’s UTC date', async () => {
    await expectDeclaredTypes(lake, getDataset('stable_chart'));
    for (const [unit, count] of [
      ['hour', 72],
      ['day', 5],
    ] as const) {
      const api = (
        (await financeData(sim.urls.finance, '/stablecoin/total_chart', { unit, unit_count: count, unit_multiplier: 1 })) as {
          history: Record<string, unknown>[];
        }
      ).history;
      const rows = await queryCatalog(
        lake,
        `SELECT epoch_ms(timestamp)::BIGINT AS ms, point_date::VARCHAR AS d, price, volume, total_supply, date_time FROM stable_chart WHERE unit = '${unit}' AND unit_multiplier = 1 ORDER BY timestamp`,
      );
      expect(rows.length).toBe(count);
      rows.forEach((r, i) => {
        const e = api[i]!;
        expect(Number(r.ms)).toBe(e.timestamp);
        expect(r.d).toBe(new Date(e.timestamp as number).toISOString().slice(0, 10));
        expect(r.price).toBe(Number(e.price));
        expect(r.volume).toBe(e.volume);
        expect(r.total_supply).toBe(e.total_supply);
        expect(r.date_time).toBe(e.dateTime);
      });
    }
    const parts = await queryCatalog(lake, `SELECT count(DISTINCT point_date)::BIGINT AS n FROM stable_chart`);
    expect(Number(parts[0]!.n)).toBeGreaterThanOrEqual(5);
  });

  it('staking_info: period objects flattened (liquidity_change_24h…), numbers exact', async () => {
    await expectDeclaredTypes(lake, getDataset('staking_info'));
    for (const pid of ex.pids) {
      const [e] = (await financeData(sim.urls.finance, '/staking/info_list', { pid })) as Record<string, Record<string, number> & Record<string, unknown>>[];
      const [r] = await queryCatalog(lake, `SELECT * FROM staking_info WHERE pid = ${pid}`);
      expect(r!.liquidity).toBe(e!.liquidity);
      expect(r!.reward_liquidity_wd).toBe(e!.reward_liquidityWD);
      for (const p of PERIODS) {
        const period = e![p] as unknown as Record<string, number>;
        expect(r![`liquidity_change_${p}`]).toBe(period.liquidity_change);
        expect(r![`reward_amount_change_${p}`]).toBe(period.reward_amount_change);
        expect(r![`reward_liquidity_wd_change_${p}`]).toBe(period.reward_liquidityWD_change);
      }
    }
  });

  it('staking_rewards: wei strings as exact DECIMAL(38,0), coin numbers as DOUBLE', async () => {
    await expectDeclaredTypes(lake, getDataset('staking_rewards'));
    for (const block of [1000, sim.head()]) {
      const d = (await financeData(sim.urls.finance, '/staking/getRewardInfo', { block_number: block })) as Record<string, Record<string, unknown>>;
      const [r] = await queryCatalog(
        lake,
        `SELECT total_staked_grand::VARCHAR AS sg, total_reward_liquid::VARCHAR AS rl, total_staked_grand_coins AS sgc, total_reward_liquid_coins AS rlc FROM staking_rewards WHERE block_number = ${block}`,
      );
      expect(r!.sg).toBe(d._staking_reward!.totalStakedGrand);
      expect(r!.rl).toBe(d._staking_reward!.totalRewardLiquid);
      expect(r!.sgc).toBe(d.staking_reward!.totalStakedGrand);
      expect(r!.rlc).toBe(d.staking_reward!.totalRewardLiquid);
    }
  });

  it('dashboard: one row, every figure of the overview', async () => {
    await expectDeclaredTypes(lake, getDataset('dashboard'));
    const d = (await financeData(sim.urls.finance, '/dashboard/overview')) as Record<string, unknown>;
    const rows = await queryCatalog(lake, `SELECT *, strftime(updated_at, '%Y-%m-%dT%H:%M:%S.%gZ') AS u FROM dashboard`);
    expect(rows.length).toBe(1);
    const r = rows[0]!;
    expect(r.u).toBe(d.updated_at);
    expect(r.tvl).toBe(d.tvl);
    expect(r.acc_user).toBe(BigInt(d.acc_user as string));
    expect(r.total_swap_number).toBe(BigInt(d.total_swap_number as string));
    expect(r.fee_24h).toBe((d['24h'] as Record<string, number>).fee);
    expect(r.pool_apr_7d).toBe((d['7d'] as Record<string, number>).pool_apr);
    for (const p of PERIODS) expect(r[`volume_${p}`], p).toBe((d[p] as Record<string, number>).volume);
  });

  it('pool_info: volumes given as strings read as DOUBLE, one row per pool', async () => {
    await expectDeclaredTypes(lake, getDataset('pool_info'));
    const rows = await queryCatalog(lake, `SELECT * FROM pool_info ORDER BY pool_address`);
    expect(rows.length).toBe(ex.pools.length);
    for (const pool of ex.pools) {
      const [e] = (await financeData(sim.urls.finance, '/pool/info_list', { pool })) as Record<string, unknown>[];
      const r = rows.find((x) => x.pool_address === lower(pool))!;
      expect(r.liquidity).toBe(e!.liquidity);
      for (const p of PERIODS) expect(r[`volume_${p}`]).toBe(Number((e![p] as Record<string, unknown>).volume));
      expect(r.swap_volume_24h).toBe(Number((e!['24h'] as Record<string, unknown>).swap_volume));
      expect(r.apr_7d).toBe((e!['7d'] as Record<string, unknown>).apr);
    }
  });
});
