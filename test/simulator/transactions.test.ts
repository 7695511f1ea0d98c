import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { ADDRESS, HASH, ISO_SECONDS, UINT, api, get } from './helpers.js';

const TX_FIELDS = [
  'timestamp',
  'nonce',
  'sender',
  'receiver',
  'value',
  'confirmations',
  'transaction_hash',
  'block_hash',
  'transaction_index',
  'tx_status',
  'tx_message',
  'in_tx_status',
  'in_tx_message',
  'tx_fee',
  'block_number',
  'contract_address',
  'gas_limit',
  'gas_price',
  'cumulative_gas_used',
  'gas_used',
  'max_fee_per_gas',
  'max_priority_fee_per_gas',
];
const SIMPLE_FIELDS = ['sender', 'receiver', 'transaction_hash', 'tx_status', 'tx_fee', 'block_number', 'gas_price', 'cumulative_gas_used', 'gas_used'];
const MAX = '115792089237316195423570985008687907853269984665640564039457584007913129639935';

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator();
});
afterAll(async () => {
  await sim.close();
});

const txPath = (a: string, qs = ''): string => `/v1/accounts/${a}/transactions${qs ? '?' + qs : ''}`;

describe('GET /v1/accounts/{address_hash}/transactions', () => {
  it('returns the envelope with string-typed entries, newest first', async () => {
    const r = await api(sim, txPath(sim.examples.whale, 'limit=1000'));
    expect(r.status).toBe(200);
    expect(r.json.status).toBe('200');
    expect(r.json.message).toBe('OK');
    expect(typeof r.json.results.count).toBe('string');
    expect(Number(r.json.results.count)).toBeGreaterThanOrEqual(100_000);
    const data = r.json.results.data as Record<string, unknown>[];
    expect(data).toHaveLength(1000);
    for (const e of data) {
      expect(Object.keys(e)).toEqual(TX_FIELDS);
      for (const f of TX_FIELDS) expect(e[f] === null || typeof e[f] === 'string').toBe(true);
      expect(e.timestamp).toMatch(ISO_SECONDS);
      expect(e.sender).toMatch(ADDRESS);
      expect(e.transaction_hash).toMatch(HASH);
      expect(e.block_hash).toMatch(HASH);
      for (const f of [
        'nonce',
        'value',
        'confirmations',
        'transaction_index',
        'tx_fee',
        'block_number',
        'gas_limit',
        'gas_price',
        'cumulative_gas_used',
        'gas_used',
      ])
        expect(e[f]).toMatch(UINT);
      expect(['0', '1']).toContain(e.tx_status);
      if (e.tx_status === '1') expect(e.tx_message).toBeNull();
      else expect(typeof e.tx_message).toBe('string');
      expect(Number(e.confirmations)).toBe(sim.head() - Number(e.block_number) + 1);
      const whale = sim.examples.whale;
      expect([String(e.sender).toLowerCase(), String(e.receiver).toLowerCase()]).toContain(whale);
    }
    for (let i = 1; i < data.length; i++) {
      const a = data[i - 1]!,
        b = data[i]!;
      const ka = Number(a.block_number) * 1e6 + Number(a.transaction_index);
      const kb = Number(b.block_number) * 1e6 + Number(b.transaction_index);
      expect(ka).toBeGreaterThan(kb);
    }
    // mixed letter case across rows
    const cases = new Set(data.map((e) => (e.transaction_hash === String(e.transaction_hash).toLowerCase() ? 'lower' : 'upper')));
    expect(cases.size).toBe(2);
  });

  it('pages concatenate to count rows without duplicates, and bytes are deterministic', async () => {
    const a = sim.examples.addresses[2]!;
    const first = await api(sim, txPath(a, 'limit=1000'));
    const count = Number(first.json.results.count);
    expect(count).toBeGreaterThan(300);
    const seen = new Set<string>();
    for (let off = 0; off < count; off += 700) {
      const r = await api(sim, txPath(a, `limit=700&offset=${off}`));
      for (const e of r.json.results.data) seen.add(String(e.transaction_hash).toLowerCase());
      expect(r.json.results.count).toBe(String(count));
    }
    expect(seen.size).toBe(count);
    const again = await api(sim, txPath(a, 'limit=1000'));
    expect(again.text).toBe(first.text);
    const other = await startSimulator({ seed: 1 });
    try {
      const r = await get(other.urls.mainnet + txPath(a, 'limit=1000'), { 'api-key': other.apiKey });
      expect(r.text).toBe(first.text);
    } finally {
      await other.close();
    }
  });

  it('filters by startBlock/endBlock inclusively and by condition', async () => {
    const w = sim.examples.whale;
    const r = await api(sim, txPath(w, 'startBlock=1000&endBlock=1010&limit=1000'));
    const data = r.json.results.data;
    expect(Number(r.json.results.count)).toBe(data.length);
    expect(data.length).toBeGreaterThan(10);
    expect(data.some((e: any) => e.block_number === '1000')).toBe(true);
    expect(data.some((e: any) => e.block_number === '1010')).toBe(true);
    for (const e of data) expect(Number(e.block_number)).toBeGreaterThanOrEqual(1000);
    const from = await api(sim, txPath(w, 'startBlock=1000&endBlock=1010&limit=1000&condition=from'));
    const to = await api(sim, txPath(w, 'startBlock=1000&endBlock=1010&limit=1000&condition=to'));
    for (const e of from.json.results.data) expect(e.sender.toLowerCase()).toBe(w);
    for (const e of to.json.results.data) expect(e.receiver.toLowerCase()).toBe(w);
    expect(Number(from.json.results.count) + Number(to.json.results.count)).toBeGreaterThanOrEqual(data.length);
  });

  it('input=true adds input; simple=true returns the S fields and to_block beside count', async () => {
    const w = sim.examples.whale;
    const r = await api(sim, txPath(w, 'limit=5&input=true'));
    for (const e of r.json.results.data) expect(e.input).toMatch(/^0x([0-9a-f]{2})*$/);
    const s = await api(sim, txPath(w, 'limit=5&simple=true&startBlock=10&endBlock=20000'));
    expect(Object.keys(s.json.results)).toEqual(['count', 'from_block', 'to_block', 'data']);
    expect(s.json.results.to_block).toBe('20000');
    expect(s.json.results.from_block).toBe('10');
    for (const e of s.json.results.data) expect(Object.keys(e)).toEqual(SIMPLE_FIELDS);
  });

  it('has contract creations, failed transactions and 2^256-1 values', async () => {
    const w = sim.examples.whale;
    let sawMax = false,
      sawFail = false;
    for (let off = 0; off < 10_000 && !(sawMax && sawFail); off += 1000) {
      const r = await api(sim, txPath(w, `limit=1000&offset=${off}&startBlock=0&endBlock=30000`));
      for (const e of r.json.results.data) {
        if (e.value === MAX) {
          sawMax = true;
          expect(e.tx_status).toBe('0');
        }
        if (e.tx_status === '0') sawFail = true;
      }
    }
    const maxes = await api(sim, txPath(w, 'limit=1000&startBlock=13&endBlock=13'));
    expect(maxes.json.results.data.some((e: any) => e.value === MAX)).toBe(true);
    expect(sawFail).toBe(true);
    const c = await api(sim, txPath(sim.examples.unverifiedContract, 'condition=contract'));
    expect(c.json.results.count).toBe('1');
    const e = c.json.results.data[0];
    expect(e.receiver).toBeNull();
    expect(e.contract_address.toLowerCase()).toBe(sim.examples.unverifiedContract);
  });

  it('rejects bad requests with the error envelope', async () => {
    const w = sim.examples.whale;
    const cases: [string, number, RegExp][] = [
      [txPath(w, 'limit=1001'), 400, /limit/],
      [txPath(w, 'limit=0'), 400, /limit/],
      [txPath(w, 'limit=abc'), 400, /limit/],
      [txPath(w, 'offset=-1'), 400, /offset/],
      [txPath(w, 'offset=9500&limit=1000'), 400, /Result window is too large.*10000/],
      [txPath(w, 'startBlock=x'), 400, /startBlock/],
      [txPath(w, 'startBlock=10&endBlock=5'), 400, /startBlock/],
      [txPath(w, 'condition=sideways'), 400, /condition/],
      [txPath(w, 'simple=maybe'), 400, /simple/],
      [txPath('0x1234'), 400, /address/],
      [txPath('0x' + 'g'.repeat(40)), 400, /address/],
      ['/v1/accounts/' + w + '/nothing', 404, /Unknown path/],
    ];
    for (const [p, status, msg] of cases) {
      const r = await api(sim, p);
      expect(r.status, p).toBe(status);
      expect(r.json.status).toBe(String(status));
      expect(r.json.message).toMatch(msg);
      expect(r.json.results).toBeNull();
    }
    const ok = await api(sim, txPath(w, 'offset=9000&limit=1000'));
    expect(ok.status).toBe(200);
  });

  it('requires the api-key header', async () => {
    const url = sim.urls.mainnet + txPath(sim.examples.whale);
    const missing = await get(url);
    expect(missing.status).toBe(401);
    expect(missing.json).toEqual({ status: '401', message: 'Missing api-key header', results: null });
    const wrong = await get(url, { 'api-key': 'nope' });
    expect(wrong.status).toBe(403);
    expect(wrong.json.status).toBe('403');
    expect(wrong.text).not.toContain(sim.apiKey);
  });

  it('unknown but well-formed address gives an empty list', async () => {
    const r = await api(sim, txPath('0x' + '12'.repeat(20)));
    expect(r.json.results).toEqual({ count: '0', data: [] });
  });

  it('a crowded block holds more rows than the result window', async () => {
    const b = sim.examples.crowdedBlock;
    const r = await api(sim, txPath(sim.examples.crowdedBlockAddress, `startBlock=${b}&endBlock=${b}&limit=1`));
    expect(Number(r.json.results.count)).toBeGreaterThan(10_000);
  });
});

describe('GET /v1/blocks/{block_number}', () => {
  it('returns block records and latest = head', async () => {
    const r = await api(sim, '/v1/blocks/latest');
    expect(r.status).toBe(200);
    const d = r.json.results.data;
    expect(Object.keys(d)).toEqual(['timestamp', 'miner', 'reward', 'fees', 'block_number', 'mining_reward']);
    expect(d.block_number).toBe(String(sim.head()));
    expect(d.timestamp).toMatch(ISO_SECONDS);
    expect(BigInt(d.reward)).toBe(BigInt(d.fees) + BigInt(d.mining_reward));
    const b = await api(sim, `/v1/blocks/${sim.examples.block}`);
    expect(b.json.results.data.block_number).toBe(String(sim.examples.block));
    expect((await api(sim, `/v1/blocks/${sim.head() + 1}`)).status).toBe(404);
    expect((await api(sim, '/v1/blocks/abc')).status).toBe(400);
  });

  it('blocks are ~12 s apart and span several UTC days', async () => {
    const a = await api(sim, '/v1/blocks/1000');
    const b = await api(sim, '/v1/blocks/1100');
    const dt = (Date.parse(b.json.results.data.timestamp) - Date.parse(a.json.results.data.timestamp)) / 1000;
    expect(dt).toBeGreaterThan(1150);
    expect(dt).toBeLessThan(1250);
    const g = await api(sim, '/v1/blocks/1');
    const h = await api(sim, '/v1/blocks/latest');
    expect(Date.parse(h.json.results.data.timestamp) - Date.parse(g.json.results.data.timestamp)).toBeGreaterThan(3 * 86_400_000);
  });
});
