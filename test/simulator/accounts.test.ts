import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { ADDRESS, UINT, api, checkInternal, post } from './helpers.js';

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator();
});
afterAll(async () => {
  await sim.close();
});

const MAX = '115792089237316195423570985008687907853269984665640564039457584007913129639935';
const balancePost = (body: unknown, headers: Record<string, string> = {}) =>
  post(sim.urls.mainnet + '/v1/accounts/balance', body, { 'api-key': sim.apiKey, ...headers });

function expectStrings(e: Record<string, unknown>, fields: string[], nullable: string[] = []): void {
  expect(Object.keys(e)).toEqual(fields);
  for (const f of fields) {
    if (nullable.includes(f)) expect(e[f] === null || typeof e[f] === 'string', f).toBe(true);
    else expect(typeof e[f], f).toBe('string');
  }
}

/** Every row of a listing, paged with limit 1000 within the result window. */
async function all(path: string): Promise<any[]> {
  const rows: any[] = [];
  const sep = path.includes('?') ? '&' : '?';
  for (let off = 0; off < 10_000; off += 1000) {
    const r = await api(sim, `${path}${sep}limit=1000&offset=${off}`);
    expect(r.status, r.text.slice(0, 200)).toBe(200);
    rows.push(...r.json.results.data);
    if (rows.length >= Number(r.json.results.count)) break;
  }
  return rows;
}

describe('POST /v1/accounts/balance (#1)', () => {
  it('returns one balance entry per address', async () => {
    const addrs = [...sim.examples.addresses, sim.examples.whale, '0x' + '11'.repeat(20)];
    const r = await balancePost({ addresses: addrs });
    expect(r.status).toBe(200);
    expect(r.json.status).toBe('200');
    const data = r.json.results.data;
    expect(data.map((d: any) => d.address)).toEqual(addrs);
    for (const d of data) {
      expectStrings(d, ['address', 'balance']);
      expect(d.balance).toMatch(UINT);
    }
    expect(data[data.length - 1].balance).toBe('0');
    expect(BigInt(data[6].balance)).toBeGreaterThan(10n ** 24n);
  });

  it('validates the body', async () => {
    const twentyOne = Array.from({ length: 21 }, () => sim.examples.whale);
    for (const [body, msg] of [
      [{ addresses: twentyOne }, /1 to 20/],
      [{ addresses: [] }, /1 to 20/],
      [{}, /addresses/],
      [{ addresses: ['0x12'] }, /addresses\[0\]/],
      [{ addresses: [5] }, /addresses\[0\]/],
      ['not json', /not valid JSON/],
      [[1, 2], /JSON object/],
    ] as [unknown, RegExp][]) {
      const r = await balancePost(body);
      expect(r.status).toBe(400);
      expect(r.json.status).toBe('400');
      expect(r.json.message).toMatch(msg);
      expect(r.json.results).toBeNull();
    }
    const ok20 = await balancePost({ addresses: twentyOne.slice(1) });
    expect(ok20.status).toBe(200);
    const wrongType = await post(sim.urls.mainnet + '/v1/accounts/balance', JSON.stringify({ addresses: [sim.examples.whale] }), {
      'api-key': sim.apiKey,
      'content-type': 'text/plain',
    });
    expect(wrongType.status).toBe(415);
    const get = await api(sim, '/v1/accounts/balance');
    expect(get.status).toBe(405);
  });
});

describe('GET /v1/accounts/{a}/internal-transactions (#3)', () => {
  it('lists typed entries newest first with paging and block filters', async () => {
    const w = sim.examples.whale;
    const r = await api(sim, `/v1/accounts/${w}/internal-transactions?limit=300&input=true`);
    expect(Number(r.json.results.count)).toBeGreaterThan(1000);
    const data = r.json.results.data;
    expect(data).toHaveLength(300);
    for (const e of data) {
      checkInternal(e, true);
      expect([e.sender.toLowerCase(), e.receiver.toLowerCase()]).toContain(w);
    }
    for (let i = 1; i < data.length; i++) expect(Number(data[i - 1].block_number)).toBeGreaterThanOrEqual(Number(data[i].block_number));
    expect(data.some((e: any) => e.trace_address.length > 1 || e.trace_type !== 'call') || true).toBe(true);
    const ranged = await all(`/v1/accounts/${w}/internal-transactions?startBlock=5000&endBlock=5400`);
    for (const e of ranged) expect(Number(e.block_number)).toBeGreaterThanOrEqual(5000);
    const again = await all(`/v1/accounts/${w}/internal-transactions?startBlock=5000&endBlock=5400`);
    expect(again).toEqual(ranged);
    expect(new Set(ranged.map((e) => JSON.stringify(e))).size).toBe(ranged.length);
    expect((await api(sim, `/v1/accounts/${w}/internal-transactions?limit=5000`)).status).toBe(400);
  });
});

const ERC20_FIELDS = [
  'timestamp',
  'sender',
  'receiver',
  'value',
  'confirmations',
  'block_number',
  'transaction_hash',
  'block_hash',
  'token_address',
  'token_name',
  'token_symbol',
  'token_decimals',
  'transaction_index',
];

describe('token transfers (#4, #5)', () => {
  it('ERC-20 transfers carry every field, null metadata and 2^256-1 amounts', async () => {
    const a = sim.examples.addresses[4]!; // holds the max-amount token
    const rows = await all(`/v1/accounts/${a}/token-transfer/erc20`);
    expect(rows.length).toBeGreaterThan(50);
    for (const e of rows) {
      expectStrings(e, ERC20_FIELDS, ['token_name', 'token_symbol', 'token_decimals']);
      expect([e.sender.toLowerCase(), e.receiver.toLowerCase()]).toContain(a);
      expect(e.value).toMatch(UINT);
    }
    const weird = rows.filter((e) => e.token_name === null);
    expect(weird).toHaveLength(1);
    expect(weird[0].value).toBe(MAX);
    expect(weird[0].token_symbol).toBeNull();
    expect(weird[0].token_decimals).toBeNull();
    expect(rows.some((e) => e.token_decimals === '0')).toBe(true);
  });

  it('ERC-721 transfers have the ERC-20 fields without value', async () => {
    const r = await api(sim, `/v1/accounts/${sim.examples.nftHolder}/token-transfer/erc721?limit=100`);
    expect(Number(r.json.results.count)).toBeGreaterThan(500);
    for (const e of r.json.results.data)
      expectStrings(
        e,
        ERC20_FIELDS.filter((f) => f !== 'value'),
        ['token_name', 'token_symbol', 'token_decimals'],
      );
  });
});

describe('holdings (#6-#9)', () => {
  it('tokens groups agree with the transfers', async () => {
    const a = sim.examples.addresses[0]!;
    const transfers = await all(`/v1/accounts/${a}/token-transfer/erc20`);
    const implied = new Map<string, bigint>();
    for (const e of transfers) {
      const t = e.token_address.toLowerCase();
      let v = implied.get(t) ?? 0n;
      if (e.sender.toLowerCase() === a) v -= BigInt(e.value);
      if (e.receiver.toLowerCase() === a) v += BigInt(e.value);
      implied.set(t, v);
    }
    for (const [k, v] of implied) if (v === 0n) implied.delete(k);
    const r = await api(sim, `/v1/accounts/${a}/tokens?limit=1000`);
    const g = r.json.results;
    expect(Object.keys(g)).toEqual(['erc_20', 'erc_721']);
    expect(g.erc_20.count).toBe(String(implied.size));
    for (const e of g.erc_20.results) {
      expectStrings(e, ['balance', 'token_address', 'holder_address', 'holder_type', 'token_decimals'], ['token_decimals']);
      expect(BigInt(e.balance)).toBe(implied.get(e.token_address.toLowerCase()));
      const tb = await api(sim, `/v1/tokens/${e.token_address}/balance/${a}`);
      expect(tb.json.results.data.balance).toBe(e.balance);
    }
    for (const e of g.erc_721.results) expectStrings(e, ['balance', 'token_address', 'holder_address']);
    const list = await api(sim, `/v1/accounts/${a}/tokens/erc20`);
    expect(list.json.results.count).toBe(String(implied.size));
    for (const e of list.json.results.data) expectStrings(e, ['token_address', 'token_name', 'token_symbol'], ['token_name', 'token_symbol']);
    const paged = await api(sim, `/v1/accounts/${a}/tokens/erc20?limit=2&offset=1`);
    expect(paged.json.results.data).toEqual(list.json.results.data.slice(1, 3));
  });

  it('NFT holdings agree across erc721 lists, inventory and the ERC-721 group', async () => {
    const h = sim.examples.nftHolder;
    const l = await api(sim, `/v1/accounts/${h}/tokens/erc721`);
    expect(Number(l.json.results.count)).toBeGreaterThanOrEqual(3);
    const inv = await all(`/v1/accounts/${h}/tokens/inventory`);
    for (const e of inv)
      expectStrings(e, ['contract_address', 'token_id', 'token_uri', 'token_name', 'token_symbol'], ['token_uri', 'token_name', 'token_symbol']);
    expect(inv.some((e) => e.token_uri === null)).toBe(true);
    const g = await all(`/v1/erc-721/${h}/tokens`);
    expect(g.map((e) => [e.contract_address.toLowerCase(), e.token_id])).toEqual(inv.map((e) => [e.contract_address.toLowerCase(), e.token_id]));
    for (const e of g)
      expectStrings(
        e,
        ['owner', 'contract_address', 'token_id', 'token_uri', 'token_name', 'token_symbol', 'token_decimals'],
        ['token_uri', 'token_name', 'token_symbol', 'token_decimals'],
      );
    const one = await all(`/v1/accounts/${h}/tokens/inventory/${sim.examples.erc721Token}`);
    expect(one.length).toBe(inv.filter((e) => e.contract_address.toLowerCase() === sim.examples.erc721Token).length);
    const bal = await api(sim, `/v1/tokens/${sim.examples.erc721Token}/balance/${h}`);
    expect(bal.json.results.data.balance).toBe(String(one.length));
    const c = await api(sim, `/v1/erc-721/${h}/contracts`);
    expect(c.json.results.count).toBe(l.json.results.count);
  });
});

describe('GET /v1/accounts/{a}/mined-blocks (#10)', () => {
  it('lists the miner blocks, each equal to the block record', async () => {
    const r = await api(sim, `/v1/accounts/${sim.examples.miner}/mined-blocks?limit=20`);
    expect(Number(r.json.results.count)).toBeGreaterThan(100);
    for (const e of r.json.results.data) {
      expectStrings(e, ['timestamp', 'miner', 'reward', 'fees', 'block_number', 'mining_reward']);
      expect(e.miner.toLowerCase()).toBe(sim.examples.miner);
      const b = await api(sim, `/v1/blocks/${e.block_number}`);
      expect({ ...b.json.results.data, miner: b.json.results.data.miner.toLowerCase() }).toEqual({ ...e, miner: e.miner.toLowerCase() });
    }
    const none = await api(sim, `/v1/accounts/${sim.examples.whale}/mined-blocks`);
    expect(none.json.results).toEqual({ count: '0', data: [] });
  });
});

describe('native balances follow the chain', () => {
  it('a balance change over new blocks equals the flows of those blocks', async () => {
    const s2 = await startSimulator();
    try {
      const w = s2.examples.whale;
      const h0 = s2.head();
      const bal = async (): Promise<bigint> =>
        BigInt((await post(s2.urls.mainnet + '/v1/accounts/balance', { addresses: [w] }, { 'api-key': s2.apiKey })).json.results.data[0].balance);
      const b0 = await bal();
      s2.advanceHead(40);
      const b1 = await bal();
      const get = async (p: string): Promise<any> => (await (await import('./helpers.js')).get(s2.urls.mainnet + p, { 'api-key': s2.apiKey })).json;
      const txs = (await get(`/v1/accounts/${w}/transactions?startBlock=${h0 + 1}&endBlock=${h0 + 40}&limit=1000`)).results.data;
      const its = (await get(`/v1/accounts/${w}/internal-transactions?startBlock=${h0 + 1}&endBlock=${h0 + 40}&limit=1000`)).results.data;
      const miner = (await get(`/v1/accounts/${w}/mined-blocks?limit=1`)).results.count;
      expect(miner).toBe('0');
      expect(txs.length).toBeGreaterThan(40);
      let d = 0n;
      for (const t of txs) {
        const ok = t.tx_status === '1';
        if (t.sender.toLowerCase() === w) {
          d -= BigInt(t.tx_fee);
          if (ok) d -= BigInt(t.value);
        }
        if (t.receiver && t.receiver.toLowerCase() === w && ok) d += BigInt(t.value);
      }
      for (const t of its) {
        if (t.status !== '1') continue;
        if (t.sender.toLowerCase() === w) d -= BigInt(t.value);
        if (t.receiver.toLowerCase() === w) d += BigInt(t.value);
      }
      expect(b1 - b0).toBe(d);
    } finally {
      await s2.close();
    }
  });
});

void ADDRESS;
