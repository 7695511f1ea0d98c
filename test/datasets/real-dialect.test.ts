import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator, type SimulatorExamples } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { apiAll } from './helpers.js';

/**
 * chainlake against the simulator's real dialect: what the real services do where they differ from the spec
 * (docs/simulator.md). Each case here failed before chainlake tolerated it.
 */
let sim: RunningSimulator;
let ex: SimulatorExamples;
const dirs: (() => Promise<void>)[] = [];

async function lakeDir(): Promise<string> {
  const { dir, cleanup } = await tempDir();
  dirs.push(cleanup);
  return dir;
}

const NOW = () => new Date('2025-06-01T12:00:00Z');

beforeAll(async () => {
  sim = await startSimulator({ seed: 5, dialect: 'real' });
  ex = sim.examples;
});

afterAll(async () => {
  await sim?.close();
  for (const c of dirs) await c();
});

describe('recorded absences', () => {
  it('an unverified contract answered with HTTP 200 and an empty results is a verified = false row with the message, on both endpoints', async () => {
    const lake = await lakeDir();
    const unknownTx = `0x${'ab'.repeat(32)}`;
    const notAToken = ex.addresses[0]!;
    const job = parseJob(
      {
        name: 'absences',
        target: 'simulator',
        lake,
        datasets: {
          contracts: { contracts: [ex.verifiedContract, ex.unverifiedContract] },
          transaction_status: { transactions: [ex.transactionHash, unknownTx] },
          token_supply: { tokens: [ex.erc20Token, notAToken] },
        },
      },
      'absences',
      process.env,
    );
    const report = await runJob(job, { simulator: sim, now: NOW });
    expect(report.errors).toEqual([]);
    expect(report.status).toBe('complete');
    // No block-ranged dataset: no head is needed, so blocks/latest (refused here) is never asked.
    expect(report.head).toBeNull();
    expect(report.outsideWindows.requests).toBe(0);
    const rows = await queryCatalog(lake, `SELECT contract_address, origin_endpoint, verified, api_message, abi::VARCHAR AS abi FROM contracts ORDER BY 1, 2`);
    const u = rows.filter((r) => r.contract_address === ex.unverifiedContract);
    expect(u).toEqual([
      { contract_address: ex.unverifiedContract, origin_endpoint: 'contract_abi', verified: false, api_message: 'contract is not yet verified', abi: null },
      { contract_address: ex.unverifiedContract, origin_endpoint: 'contract_code', verified: false, api_message: 'contract is not yet verified', abi: null },
    ]);
    const v = rows.filter((r) => r.contract_address === ex.verifiedContract);
    expect(v.map((r) => [r.verified, r.api_message, r.abi === null])).toEqual([
      [true, null, false],
      [true, null, false],
    ]);
    const tx = await queryCatalog(lake, `SELECT transaction_hash, status_kind, status, found, api_message FROM transaction_status ORDER BY 1, 2`);
    expect(tx.filter((r) => r.transaction_hash === unknownTx)).toEqual([
      { transaction_hash: unknownTx, status_kind: 'receipt_status', status: null, found: false, api_message: `Transaction ${unknownTx} not found` },
      { transaction_hash: unknownTx, status_kind: 'transaction_status', status: null, found: false, api_message: `Transaction ${unknownTx} not found` },
    ]);
    expect(tx.filter((r) => r.transaction_hash !== unknownTx).every((r) => r.found === true && typeof r.status === 'boolean')).toBe(true);
    const supply = await queryCatalog(lake, `SELECT token_address, total_supply::VARCHAR AS s, found, api_message FROM token_supply ORDER BY 1`);
    const absent = supply.find((r) => r.token_address === notAToken.toLowerCase())!;
    expect(absent.found).toBe(false);
    expect(absent.s).toBeNull();
    expect(absent.api_message).toMatch(/not found/);
    expect(supply.find((r) => r.token_address === ex.erc20Token.toLowerCase())!.found).toBe(true);
  });
});

describe('the head without blocks/latest', () => {
  it('is found by a bounded search over /v1/blocks/{n}, and from the last recorded head on the next run', async () => {
    const lake = await lakeDir();
    const doc = {
      name: 'head-search',
      target: 'simulator',
      lake,
      range: { incremental: true },
      datasets: { erc20_transfers: { addresses: [ex.addresses[0]] } },
    };
    const first = await runJob(parseJob(doc, 'head-search', process.env), { simulator: sim, now: NOW });
    expect(first.errors).toEqual([]);
    expect(first.status).toBe('complete');
    expect(first.head).toBe(sim.head());
    // One refused `latest`, then about 2 log2(head) probes from block 0.
    const bound = 1 + 2 * Math.ceil(Math.log2(sim.head() + 1)) + 2;
    expect(first.outsideWindows.requests).toBeGreaterThan(2);
    expect(first.outsideWindows.requests).toBeLessThanOrEqual(bound);

    sim.advanceHead(100);
    const second = await runJob(parseJob(doc, 'head-search', process.env), { simulator: sim, now: NOW });
    expect(second.status).toBe('complete');
    expect(second.head).toBe(sim.head());
    // From the last head: 100 blocks away, so 1 + 2 * ceil(log2(101)) at most.
    expect(second.outsideWindows.requests).toBeLessThanOrEqual(1 + 2 * 7 + 1);
    expect(second.outsideWindows.requests).toBeLessThan(first.outsideWindows.requests);
  });

  it('is taken as given from the job (range.head): nothing is asked', async () => {
    const lake = await lakeDir();
    const head = sim.head() - 50;
    const report = await runJob(
      parseJob(
        { name: 'head-given', target: 'simulator', lake, range: { head }, datasets: { erc20_transfers: { addresses: [ex.addresses[0]] } } },
        'head-given',
        process.env,
      ),
      { simulator: sim, now: NOW },
    );
    expect(report.status).toBe('complete');
    expect(report.head).toBe(head);
    expect(report.outsideWindows.requests).toBe(0);
  });

  it('a finance-only job needs no head and no explorer URL', async () => {
    const lake = await lakeDir();
    const job = parseJob(
      {
        name: 'finance-only',
        target: 'api',
        endpoints: { finance: sim.urls.finance },
        lake,
        datasets: { dashboard: {}, staking_info: { pids: ex.pids } },
      },
      'finance-only',
      {},
    );
    const report = await runJob(job, { now: NOW });
    expect(report.errors).toEqual([]);
    expect(report.status).toBe('complete');
    expect(report.head).toBeNull();
    expect(report.totals.rows).toBeGreaterThan(0);
    // An explorer dataset without an explorer URL is still a clear job error.
    expect(() => parseJob({ target: 'api', endpoints: { finance: sim.urls.finance }, datasets: { blocks: { blocks: [1] } } }, 'needs-explorer', {})).toThrow(
      /endpoints\.mainnet: no mainnet base URL/,
    );
  });
});

describe('nothing dropped', () => {
  it('event-log entries keep their unlisted id and sequence in the extra column, digits as received, on the staged-as-received path and the converters alike', async () => {
    // Transfers of the token sent by one address: a listing of a few dozen entries.
    const from = `0x${'0'.repeat(24)}${ex.addresses[0]!.slice(2).toLowerCase()}`;
    const api = await apiAll(sim.urls.mainnet, sim.apiKey, '/v1/event-logs', { address: ex.erc20Token, topic_0: ex.transferTopic, topic_1: from });
    expect(api.length).toBeGreaterThan(3);
    expect(api.every((e) => typeof e.id === 'string')).toBe(true);
    const expected = api.map((e) => `${String(e.transaction_hash).toLowerCase()}/${String(e.log_index)}/${String(e.id)}`).sort();
    const lakes: string[] = [];
    for (const stageReceived of [true, false]) {
      const lake = await lakeDir();
      lakes.push(lake);
      const report = await runJob(
        parseJob(
          {
            name: 'extra',
            target: 'simulator',
            lake,
            datasets: { event_logs: { contracts: [ex.erc20Token], topics: [ex.transferTopic, from] }, blocks: { blocks: [ex.block] } },
          },
          'extra',
          process.env,
        ),
        { simulator: sim, now: NOW, stageReceived },
      );
      expect(report.status).toBe('complete');
      expect(report.unknownFields).toEqual({ event_logs: ['id', 'sequence'] });
      const rows = await queryCatalog(lake, `SELECT transaction_hash, log_index, extra->>'id' AS id, extra::VARCHAR AS x FROM event_logs`);
      expect(rows.map((r) => `${String(r.transaction_hash)}/${String(r.log_index)}/${String(r.id)}`).sort()).toEqual(expected);
      // The sequence is a JSON number beyond 2^53 (1 and 17 digits ending in the id): JSON.parse would round it.
      const exact = (id: string): string => `{"id":"${id}","sequence":1${id.padStart(17, '0')}}`;
      expect(Number(`1${'42'.padStart(17, '0')}`).toString()).not.toBe(`1${'42'.padStart(17, '0')}`);
      expect(rows.map((r) => r.x)).toEqual(rows.map((r) => exact(String(r.id))));
      // Entries with nothing unlisted have no extra.
      const t = await queryCatalog(lake, `SELECT count(*)::INT AS n, count(extra)::INT AS with_extra FROM blocks`);
      expect(t[0]!.n).toBeGreaterThan(0);
      expect(t[0]!.with_extra).toBe(0);
    }
  });
});

describe('nothing dropped, in pages made from other pages', () => {
  it('every log of a contract keeps its sequence digit for digit, also where bisection reuses a parent page', async () => {
    const lake = await lakeDir();
    // Small pages and a small result window: event logs carry no block number, so a contract over the cap is
    // bisected, and each part's first page is cut from its parent's first page (no body of its own). The last
    // thousand blocks hold a few hundred of the token's logs: many result windows, so the window is still bisected.
    const head = sim.head();
    const report = await runJob(
      parseJob(
        {
          name: 'cut-extra',
          target: 'simulator',
          lake,
          pageSize: 10,
          resultWindow: 40,
          range: { fromBlock: head - 1000, toBlock: head, head },
          datasets: { event_logs: { contracts: [ex.erc20Token] } },
        },
        'cut-extra',
        process.env,
      ),
      { simulator: sim, now: NOW },
    );
    expect(report.status).toBe('complete');
    const [w] = await queryCatalog(lake, `SELECT sum(splits)::INT AS splits FROM windows`);
    expect(w!.splits, 'the window was bisected').toBeGreaterThan(0);
    const rows = await queryCatalog(lake, `SELECT extra->>'id' AS id, extra::VARCHAR AS x FROM event_logs`);
    expect(rows.length).toBeGreaterThan(40);
    const exact = (id: string): string => `{"id":"${id}","sequence":1${id.padStart(17, '0')}}`;
    expect(rows.filter((r) => r.x !== exact(String(r.id)))).toEqual([]);
  });
});

describe('address-only event logs', () => {
  it('a contract without topics exports all its logs; given topics still filter; one row per log across both scopes', async () => {
    const head = sim.head();
    const range = { fromBlock: head - 4000, toBlock: head, head };
    const q = { address: ex.erc721Token, start_block: range.fromBlock, end_block: head };
    const all = await apiAll(sim.urls.mainnet, sim.apiKey, '/v1/event-logs', q);
    const from = `0x${'0'.repeat(24)}${ex.nftHolder.slice(2).toLowerCase()}`;
    const filtered = await apiAll(sim.urls.mainnet, sim.apiKey, '/v1/event-logs', { ...q, topic_1: from });
    expect(all.length).toBeGreaterThan(20);
    expect(filtered.length).toBeLessThan(all.length);
    const lake = await lakeDir();
    const report = await runJob(
      parseJob(
        {
          name: 'all-logs',
          target: 'simulator',
          lake,
          range,
          datasets: { event_logs: { contracts: [ex.erc721Token, { address: ex.erc721Token, topics: [null, from] }] } },
        },
        'all-logs',
        process.env,
      ),
      { simulator: sim, now: NOW },
    );
    expect(report.errors).toEqual([]);
    expect(report.status).toBe('complete');
    const key = (e: Record<string, unknown>) => `${String(e.transaction_hash).toLowerCase()}/${String(e.log_index)}`;
    const rows = await queryCatalog(lake, `SELECT transaction_hash, log_index FROM event_logs`);
    expect(rows.map(key).sort()).toEqual(all.map(key).sort());
    // The filtered scope fetched exactly the API's filtered listing (its rows are among the same keys).
    const ds = report.datasets.find((d) => d.dataset === 'event_logs')!;
    expect(ds.rows).toBe(all.length + filtered.length);
    expect(filtered.map(key).every((k) => rows.some((r) => key(r) === k))).toBe(true);
  });
});

describe('path overrides', () => {
  const chartJob = (lake: string, paths?: Record<string, string>) =>
    parseJob(
      {
        name: 'chart',
        target: 'simulator',
        lake,
        ...(paths ? { paths } : {}),
        datasets: { stable_chart: { charts: [{ unit: 'hour', unit_count: 24, unit_multiplier: 1 }] } },
      },
      'chart',
      process.env,
    );

  it('the stable-coin chart served under its coin’s path is exported with a paths override, and fails without it', async () => {
    const without = await runJob(chartJob(await lakeDir()), { simulator: sim, now: NOW });
    expect(without.status).not.toBe('complete');
    expect(JSON.stringify(without.errors)).toMatch(/404/);
    const lake = await lakeDir();
    const report = await runJob(chartJob(lake, { total_chart: '/usdx/total_chart' }), { simulator: sim, now: NOW });
    expect(report.errors).toEqual([]);
    expect(report.status).toBe('complete');
    const rows = await queryCatalog(lake, `SELECT count(*)::INT AS n, count(DISTINCT timestamp)::INT AS t FROM stable_chart`);
    expect(rows).toEqual([{ n: 24, t: 24 }]);
  });

  it('is checked when the job is loaded: a known endpoint id, a path, the placeholders its scope gives', () => {
    const bad = (paths: unknown) => () => parseJob({ target: 'simulator', paths, datasets: { dashboard: {} } }, 'paths-job', process.env);
    expect(bad({ totl_chart: '/x' })).toThrow(/paths-job: paths\.totl_chart: unknown endpoint id 'totl_chart'; valid ids .*total_chart/);
    expect(bad({ total_chart: 'usdx/total_chart' })).toThrow(/paths\.total_chart: must be a path starting with '\/'/);
    expect(bad({ total_chart: '/usdx/total_chart?x=1' })).toThrow(/paths\.total_chart: must be a path/);
    expect(bad({ contract_abi: '/v2/contract/{address}/abi' })).toThrow(/paths\.contract_abi: uses \{address\}.*it may use \{contract\}/);
    expect(bad([])).toThrow(/paths: must be an object/);
    const ok = parseJob(
      { target: 'simulator', paths: { contract_abi: '/v2/contracts/{contract}/abi', block: '/v1/block/{block}' }, datasets: { dashboard: {} } },
      'ok',
      process.env,
    );
    expect(ok.source.paths).toEqual({ contract_abi: '/v2/contracts/{contract}/abi', block: '/v1/block/{block}' });
  });
});
