import { request } from 'undici';
import { expect } from 'vitest';
import type { DatasetDef } from '../../src/datasets/dataset.js';
import { lakeColumns } from '../../src/load/schema.js';
import type { SimulatorExamples } from '../../src/simulator/index.js';
import { queryCatalog } from '../helpers/lake.js';

/**
 * A job's `datasets` object naming every dataset of both APIs with small scopes from the simulator's
 * examples. `everyEndpoint` also names the alternate endpoints, so each endpoint of the spec is fetched.
 */
export function allDatasetsSpec(ex: SimulatorExamples, opts: { everyEndpoint?: boolean } = {}): Record<string, Record<string, unknown>> {
  const all = opts.everyEndpoint;
  return {
    transactions: { addresses: [ex.addresses[0]] },
    internal_transactions: { addresses: [ex.addresses[0]], transactions: [ex.internalTransactionHash] },
    erc20_transfers: { addresses: [ex.addresses[0]] },
    erc721_transfers: { addresses: [ex.nftHolder] },
    event_logs: { contracts: [ex.erc20Token], topics: [ex.transferTopic] },
    mined_blocks: { addresses: [ex.miner] },
    blocks: { blocks: [ex.block, `${ex.block + 1}-${ex.block + 3}`] },
    balances: { addresses: [...ex.addresses, ex.whale] },
    token_holdings: { addresses: [ex.nftHolder] },
    nft_inventory: {
      addresses: [ex.nftHolder],
      tokens: [ex.erc721Token],
      pairs: [{ token: ex.erc721Token, holder: ex.nftHolder }],
      ...(all ? { endpoints: ['account_inventory', 'token_inventory', 'erc721_inventory', 'token_holder_inventory', 'account_token_inventory'] } : {}),
    },
    token_supply: { tokens: [ex.erc20Token, ex.erc721Token] },
    token_balances: { pairs: [{ token: ex.erc20Token, holder: ex.addresses[0] }] },
    transaction_status: { transactions: [ex.transactionHash, ex.failedTransactionHash] },
    contracts: { contracts: [ex.verifiedContract, ex.unverifiedContract] },
    stable_chart: { charts: [{ unit: 'hour', unit_count: 48, unit_multiplier: 1 }] },
    staking_info: { pids: ex.pids },
    staking_rewards: {},
    dashboard: {},
    pool_info: { pools: ex.pools },
  };
}

/** Every column of the dataset's view has the DuckDB type its declaration gives (plus the Hive columns). */
export async function expectDeclaredTypes(lake: string, def: DatasetDef): Promise<void> {
  const rows = await queryCatalog(lake, `DESCRIBE ${def.name}`);
  const types = Object.fromEntries(rows.map((r) => [r.column_name as string, r.column_type as string]));
  const expected: Record<string, string> = { network: 'VARCHAR', [def.partition]: 'DATE' };
  for (const c of lakeColumns(def)) expected[c.name] = c.type;
  expect(types).toEqual(expected);
}

/** The explorer's `results` for one GET, read directly (the test's independent view of the API). */
export async function apiResults(base: string, apiKey: string, path: string, query: Record<string, string | number> = {}): Promise<Record<string, unknown>> {
  const u = new URL(base + path);
  for (const [k, v] of Object.entries(query)) u.searchParams.set(k, String(v));
  const res = await request(u, { headers: { 'api-key': apiKey } });
  const body = (await res.body.json()) as { status: string; results: Record<string, unknown> };
  if (body.status !== '200') throw new Error(`unexpected envelope for ${path}: ${JSON.stringify(body).slice(0, 200)}`);
  return body.results;
}

/** Every entry of an offset-paged explorer listing (entries at `at`, count beside them). */
export async function apiAll(
  base: string,
  apiKey: string,
  path: string,
  query: Record<string, string | number> = {},
  at = ['data'],
  countAt = ['count'],
): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for (let offset = 0; offset < 100_000; offset += 1000) {
    const r = await apiResults(base, apiKey, path, { ...query, limit: 1000, offset });
    const dig = (p: string[]): unknown => p.reduce<unknown>((v, k) => (v as Record<string, unknown>)[k], r);
    out.push(...(dig(at) as Record<string, unknown>[]));
    if (out.length >= Number(dig(countAt))) break;
  }
  return out;
}

/** The finance envelope's `data` for one GET. */
export async function financeData(base: string, path: string, query: Record<string, string | number> = {}): Promise<unknown> {
  const u = new URL(base + path);
  for (const [k, v] of Object.entries(query)) u.searchParams.set(k, String(v));
  const res = await request(u, { headers: { accept: 'application/json' } });
  const body = (await res.body.json()) as { type: string; data: unknown };
  if (body.type !== 'success') throw new Error(`unexpected envelope for ${path}: ${JSON.stringify(body).slice(0, 200)}`);
  return body.data;
}

export const lower = (v: unknown): string => String(v).toLowerCase();
export const big = (v: unknown): bigint => (v === null || v === undefined ? 0n : BigInt(v as string));
export const DECIMAL38 = 10n ** 38n;

/** Sum of amounts as the lake splits them: DECIMAL part and _raw part, both exact. */
export async function lakeAmountSum(lake: string, dataset: string, column: string, where = 'true'): Promise<bigint> {
  const [r] = await queryCatalog(
    lake,
    `SELECT coalesce(sum(${column}), 0)::VARCHAR AS dec, coalesce(list(${column}_raw) FILTER (WHERE ${column}_raw IS NOT NULL), []) AS raws FROM ${dataset} WHERE ${where}`,
  );
  return BigInt(r!.dec as string) + (r!.raws as string[]).reduce((a, b) => a + BigInt(b), 0n);
}
