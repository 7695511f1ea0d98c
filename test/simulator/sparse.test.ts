import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { SPARSE_HEAD, SparseChain } from '../../src/simulator/sparse.js';

describe('the sparse chain of realistic height', () => {
  const c = new SparseChain(1, 'mainnet');

  it('is tall, sparse early, dense late, with long empty stretches, and the same for the same seed', () => {
    expect(c.head).toBeGreaterThanOrEqual(50_000_000);
    const dense = c.addresses.dense;
    const total = c.count(dense, 0, c.head);
    const early = c.count(dense, 0, 10_000_000);
    const late = c.count(dense, 40_000_000, c.head);
    expect(early).toBeGreaterThan(0);
    expect(late).toBeGreaterThan(20 * early);
    expect(total).toBeGreaterThan(50_000);
    // Some 1M-block eras are empty.
    let empty = 0;
    for (let e = 0; e < 53; e++) if (c.count(dense, e * 1_000_000, e * 1_000_000 + 999_999) === 0) empty++;
    expect(empty).toBeGreaterThan(3);
    const sparse = c.count(c.addresses.sparse, 0, c.head);
    expect(sparse).toBeGreaterThan(0);
    expect(sparse).toBeLessThan(100);
    expect(c.count(c.addresses.empty, 0, c.head)).toBe(0);
    const again = new SparseChain(1, 'mainnet');
    expect(again.addresses).toEqual(c.addresses);
    expect(again.count(dense, 0, c.head)).toBe(total);
    expect(new SparseChain(2, 'mainnet').count(new SparseChain(2, 'mainnet').addresses.dense, 0, c.head)).not.toBe(total);
  });

  it('pages a range newest first, in step with its count', () => {
    const dense = c.addresses.dense;
    const from = 45_000_000,
      to = 45_400_000;
    const n = c.count(dense, from, to);
    expect(n).toBeGreaterThan(500);
    const rows = c.scope(dense)!.page(from, to, 0, n + 10);
    expect(rows).toHaveLength(n);
    for (let i = 1; i < rows.length; i++) {
      const [a, b] = [rows[i - 1]!, rows[i]!];
      expect(a.block > b.block || (a.block === b.block && a.index > b.index)).toBe(true);
    }
    expect(rows.every((r) => r.block >= from && r.block <= to)).toBe(true);
    expect(c.scope(dense)!.page(from, to, 100, 50)).toEqual(rows.slice(100, 150));
  });
});

describe('the simulator with chain sparse', () => {
  let sim: RunningSimulator;
  beforeAll(async () => {
    sim = await startSimulator({ seed: 1, chain: 'sparse' });
  });
  afterAll(() => sim.close());
  const get = async (path: string): Promise<{ status: number; body: any }> => {
    const r = await fetch(sim.urls.mainnet + path, { headers: { 'api-key': sim.apiKey } });
    return { status: r.status, body: await r.json() };
  };

  it('serves the tall head, its blocks and its addresses’ transfers; the demo chain answers the rest', async () => {
    expect(sim.head()).toBe(SPARSE_HEAD);
    expect((await get('/v1/blocks/latest')).body.results.data.block_number).toBe(String(SPARSE_HEAD));
    expect((await get('/v1/blocks/52000000')).body.results.data.block_number).toBe('52000000');
    expect((await get(`/v1/blocks/${SPARSE_HEAD + 1}`)).status).toBe(404);
    const a = sim.sparseAddresses!.sparse;
    const page = (await get(`/v1/accounts/${a}/token-transfer/erc20?limit=1000&startBlock=0&endBlock=${SPARSE_HEAD}`)).body.results;
    expect(Number(page.count)).toBe(new SparseChain(1, 'mainnet').count(a, 0, SPARSE_HEAD));
    expect(page.data).toHaveLength(Number(page.count));
    expect(Object.keys(page.data[0]).sort()).toEqual(
      [
        'block_hash',
        'block_number',
        'confirmations',
        'receiver',
        'sender',
        'timestamp',
        'token_address',
        'token_decimals',
        'token_name',
        'token_symbol',
        'transaction_hash',
        'transaction_index',
        'value',
      ].sort(),
    );
    const capped = await get(`/v1/accounts/${sim.sparseAddresses!.dense}/token-transfer/erc20?limit=1000&offset=9500`);
    expect(capped.status).toBe(400);
    // An address of the demo chain is the demo chain's.
    expect((await get(`/v1/accounts/${sim.examples.whale}/token-transfer/erc20?limit=1`)).status).toBe(200);
  });
});
