import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getDataset } from '../../src/datasets/registry.js';
import { parseJob } from '../../src/pipeline/job.js';
import type { RunReport } from '../../src/pipeline/report.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator, type SimulatorExamples } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { apiAll, apiResults, big, DECIMAL38, expectDeclaredTypes, lakeAmountSum, lower } from './helpers.js';

/** Chain datasets of the explorer, one run over small scopes, compared field by field with the API. */
let sim: RunningSimulator;
let ex: SimulatorExamples;
let lake: string;
let cleanup: () => Promise<void>;
let report: RunReport;
let head: number;
const FROM = 0;

beforeAll(async () => {
  sim = await startSimulator({ seed: 5 });
  ex = sim.examples;
  head = sim.head();
  ({ dir: lake, cleanup } = await tempDir());
  const nftPadded = `0x${'0'.repeat(24)}${ex.nftHolder.slice(2)}`;
  const job = parseJob(
    {
      name: 'chain',
      target: 'simulator',
      lake,
      concurrency: 4,
      range: { fromBlock: FROM },
      datasets: {
        internal_transactions: { addresses: [ex.addresses[1]], transactions: [ex.internalTransactionHash], input: true },
        erc20_transfers: { addresses: ex.addresses },
        erc721_transfers: { addresses: [ex.addresses[1], ex.addresses[2]] },
        event_logs: {
          contracts: [
            { address: ex.erc721Token, topics: [ex.transferTopic, null, nftPadded] },
            { address: ex.erc20Token, topics: [ex.transferTopic, nftPadded, nftPadded], operand: 'or' },
          ],
        },
        mined_blocks: { addresses: [ex.miner] },
        blocks: { blocks: [ex.block, `${ex.block + 1}-${ex.block + 3}`] },
      },
    },
    'chain-test',
    process.env,
  );
  report = await runJob(job, { simulator: sim });
}, 90_000);

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

const range = () => ({ startBlock: FROM, endBlock: head });

describe('chain datasets round trip (simulator -> lake -> DuckDB)', () => {
  it('the run completes without rejects', () => {
    expect(report.errors).toEqual([]);
    expect(report.status).toBe('complete');
    expect(report.totals.rejects).toBe(0);
    expect(report.unknownFields).toEqual({});
  });

  it('internal_transactions: both endpoints, one row per (transaction_hash, trace_address), values exact', async () => {
    await expectDeclaredTypes(lake, getDataset('internal_transactions'));
    const api = new Map<string, Record<string, unknown>>();
    const add = (e: Record<string, unknown>) => api.set(`${lower(e.transaction_hash)}/${JSON.stringify(e.trace_address)}`, e);
    (await apiAll(sim.urls.mainnet, sim.apiKey, `/v1/accounts/${ex.addresses[1]}/internal-transactions`, { ...range(), input: 'true' })).forEach(add);
    const byTx = await apiResults(sim.urls.mainnet, sim.apiKey, `/v1/transactions/${ex.internalTransactionHash}/internal-transactions`, {
      limit: 1000,
      input: 'true',
    });
    (byTx.data as Record<string, unknown>[]).forEach(add);
    expect((byTx.data as unknown[]).length).toBeGreaterThan(2);
    const [agg] = await queryCatalog(
      lake,
      `SELECT count(*)::BIGINT AS n, count(DISTINCT (transaction_hash, trace_address))::BIGINT AS keys, sum(gas_used)::BIGINT AS gas,
              count(*) FILTER (WHERE input IS NULL)::BIGINT AS no_input, max(len(trace_address))::BIGINT AS depth FROM internal_transactions`,
    );
    expect(Number(agg!.n)).toBe(api.size);
    expect(Number(agg!.keys)).toBe(api.size);
    expect(agg!.no_input).toBe(0n);
    expect(agg!.gas).toBe([...api.values()].reduce((a, e) => a + BigInt(e.gas_used as string), 0n));
    expect(await lakeAmountSum(lake, 'internal_transactions', 'value')).toBe([...api.values()].reduce((a, e) => a + big(e.value), 0n));
    for (const e of byTx.data as Record<string, unknown>[]) {
      const [row] = await queryCatalog(
        lake,
        `SELECT *, strftime(timestamp, '%Y-%m-%dT%H:%M:%SZ') AS ts, block_date::VARCHAR AS bd FROM internal_transactions WHERE transaction_hash = '${lower(e.transaction_hash)}' AND trace_address = [${(e.trace_address as string[]).join(',')}]::INTEGER[]`,
      );
      expect(row, JSON.stringify(e)).toBeDefined();
      expect(row!.trace_address).toEqual((e.trace_address as string[]).map(Number));
      expect(row!.trace_type).toBe(e.trace_type);
      expect(row!.sub_traces).toBe(e.sub_traces === null ? null : BigInt(e.sub_traces as string));
      expect(row!.external_receiver).toBe(e.external_receiver);
      expect(row!.status).toBe(e.status === '1');
      expect(row!.sender).toBe(lower(e.sender));
      expect(row!.input).toBe(lower(e.input));
      expect(row!.ts).toBe(e.timestamp);
      // The partition column: the UTC date of the timestamp (toBeDefined() would pass for NULL).
      expect(row!.bd).toBe(String(e.timestamp).slice(0, 10));
    }
  });

  it('erc20_transfers: every transfer once (ordinal for identical ones), sum(value) exact incl. 2^256-1 via value_raw', async () => {
    const def = getDataset('erc20_transfers');
    await expectDeclaredTypes(lake, def);
    // Independent numbering: within each listing, identical entries of a transaction get 0, 1, 2...
    const keys = new Map<string, Record<string, unknown>>();
    for (const a of ex.addresses) {
      const seen = new Map<string, number>();
      for (const e of await apiAll(sim.urls.mainnet, sim.apiKey, `/v1/accounts/${a}/token-transfer/erc20`, range())) {
        const id = [lower(e.transaction_hash), lower(e.token_address), lower(e.sender), lower(e.receiver), e.value].join('/');
        const n = seen.get(id) ?? 0;
        seen.set(id, n + 1);
        keys.set(`${id}/${n}`, e);
      }
    }
    const [agg] = await queryCatalog(
      lake,
      `SELECT count(*)::BIGINT AS n, max(ordinal)::BIGINT AS maxord, count(DISTINCT (transaction_hash, token_address, sender, receiver, coalesce(value::VARCHAR, value_raw), ordinal))::BIGINT AS k FROM erc20_transfers`,
    );
    expect(Number(agg!.n)).toBe(keys.size);
    expect(Number(agg!.k)).toBe(keys.size);
    const exact = [...keys.values()].reduce((s, e) => s + big(e.value), 0n);
    expect(await lakeAmountSum(lake, 'erc20_transfers', 'value')).toBe(exact);
    const huge = [...keys.values()].filter((e) => big(e.value) >= DECIMAL38);
    expect(huge.length).toBeGreaterThan(0);
    expect(huge.map((e) => e.value)).toContain(String(2n ** 256n - 1n));
    const raws = await queryCatalog(lake, `SELECT value_raw FROM erc20_transfers WHERE value_raw IS NOT NULL`);
    expect(raws.map((r) => r.value_raw).sort()).toEqual(huge.map((e) => e.value).sort());
    const [nulls] = await queryCatalog(lake, `SELECT count(*)::BIGINT AS n FROM erc20_transfers WHERE token_name IS NULL`);
    expect(Number(nulls!.n)).toBe([...keys.values()].filter((e) => e.token_name === null).length);
  });

  it('erc721_transfers: #5 and #25 in one table, origin recorded, token ids exact', async () => {
    await expectDeclaredTypes(lake, getDataset('erc721_transfers'));
    for (const [origin, path] of [
      ['account_erc721_transfers', 'accounts/{a}/token-transfer/erc721'],
      ['erc721_token_transfers', 'erc-721/{a}/token-transfer'],
    ] as const) {
      const api = new Set<string>();
      for (const a of [ex.addresses[1]!, ex.addresses[2]!]) {
        const seen = new Map<string, number>();
        for (const e of await apiAll(sim.urls.mainnet, sim.apiKey, `/v1/${path.replace('{a}', a)}`, range())) {
          const id = [lower(e.transaction_hash), lower(e.token_address), lower(e.sender), lower(e.receiver), e.token_id ?? ''].join('/');
          const n = seen.get(id) ?? 0;
          seen.set(id, n + 1);
          api.add(`${id}/${n}`);
        }
      }
      const rows = await queryCatalog(
        lake,
        `SELECT transaction_hash || '/' || token_address || '/' || sender || '/' || receiver || '/' || coalesce(token_id, '') || '/' || ordinal AS k FROM erc721_transfers WHERE origin_endpoint = '${origin}'`,
      );
      expect(rows.length, origin).toBe(api.size);
      expect(new Set(rows.map((r) => r.k))).toEqual(api);
    }
    const [n] = await queryCatalog(
      lake,
      `SELECT count(*) FILTER (WHERE token_id IS NOT NULL AND origin_endpoint = 'account_erc721_transfers')::BIGINT AS bad FROM erc721_transfers`,
    );
    expect(n!.bad).toBe(0n);
  });

  it('event_logs: block-windowed by start_block/end_block, partitioned by the log’s date, one row per (transaction_hash, log_index)', async () => {
    await expectDeclaredTypes(lake, getDataset('event_logs'));
    const nftPadded = `0x${'0'.repeat(24)}${ex.nftHolder.slice(2)}`;
    const api = new Map<string, Record<string, unknown>>();
    const q = { start_block: FROM, end_block: head, topic_0: ex.transferTopic };
    for (const e of await apiAll(sim.urls.mainnet, sim.apiKey, '/v1/event-logs', { ...q, address: ex.erc721Token, topic_2: nftPadded }))
      api.set(`${lower(e.transaction_hash)}/${e.log_index}`, e);
    for (const e of await apiAll(sim.urls.mainnet, sim.apiKey, '/v1/event-logs', {
      ...q,
      address: ex.erc20Token,
      topic_1: nftPadded,
      topic_2: nftPadded,
      operand: 'or',
    }))
      api.set(`${lower(e.transaction_hash)}/${e.log_index}`, e);
    expect(api.size).toBeGreaterThan(10);
    const rows = await queryCatalog(
      lake,
      `SELECT transaction_hash || '/' || log_index AS k, topic_0, topic_3, data, strftime(timestamp, '%Y-%m-%dT%H:%M:%SZ') AS ts, block_date::VARCHAR AS d FROM event_logs`,
    );
    expect(rows.length).toBe(api.size);
    for (const r of rows) {
      const e = api.get(r.k as string)!;
      expect(e, r.k as string).toBeDefined();
      expect(r.topic_0).toBe(ex.transferTopic);
      expect(r.topic_3).toBe(e.topic_3 === null ? null : lower(e.topic_3));
      expect(r.data).toBe(lower(e.data));
      expect(r.ts).toBe(e.timestamp);
      expect(r.d).toBe((e.timestamp as string).slice(0, 10));
    }
  });

  it('mined_blocks: the whole listing of the miner, rewards exact', async () => {
    await expectDeclaredTypes(lake, getDataset('mined_blocks'));
    const api = await apiAll(sim.urls.mainnet, sim.apiKey, `/v1/accounts/${ex.miner}/mined-blocks`);
    const [agg] = await queryCatalog(lake, `SELECT count(*)::BIGINT AS n, count(DISTINCT miner)::BIGINT AS miners, min(miner) AS miner FROM mined_blocks`);
    expect(Number(agg!.n)).toBe(api.length);
    expect(agg!.miners).toBe(1n);
    expect(agg!.miner).toBe(ex.miner);
    expect(await lakeAmountSum(lake, 'mined_blocks', 'reward')).toBe(api.reduce((s, e) => s + big(e.reward), 0n));
    expect(await lakeAmountSum(lake, 'mined_blocks', 'fees')).toBe(api.reduce((s, e) => s + big(e.fees), 0n));
  });

  it('blocks: one row per scoped block number, equal to the block record', async () => {
    await expectDeclaredTypes(lake, getDataset('blocks'));
    const rows = await queryCatalog(
      lake,
      `SELECT block_number, miner, reward::VARCHAR AS reward, fees::VARCHAR AS fees, mining_reward::VARCHAR AS mr FROM blocks ORDER BY block_number`,
    );
    expect(rows.map((r) => Number(r.block_number))).toEqual([ex.block, ex.block + 1, ex.block + 2, ex.block + 3]);
    for (const r of rows) {
      const d = (await apiResults(sim.urls.mainnet, sim.apiKey, `/v1/blocks/${r.block_number}`)).data as Record<string, unknown>;
      expect(r.miner).toBe(lower(d.miner));
      expect(r.reward).toBe(d.reward);
      expect(r.fees).toBe(d.fees);
      expect(r.mr).toBe(d.mining_reward);
    }
  });
});
