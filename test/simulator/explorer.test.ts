import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { HASH, ISO_SECONDS, UINT, api, checkInternal, post } from './helpers.js';
import { chainFor } from '../../src/simulator/index.js';
import { unnamedTopic } from '../../src/simulator/contracts.js';
import { A_POOL0 } from '../../src/simulator/chain.js';

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator();
});
afterAll(async () => {
  await sim.close();
});

const MAX = '115792089237316195423570985008687907853269984665640564039457584007913129639935';
const ZERO_TOPIC = '0x' + '0'.repeat(64);
const padTopic = (a: string): string => '0x' + a.slice(2).toLowerCase().padStart(64, '0');

describe('transaction status (#11, #12)', () => {
  it('reports success, failure with a description, and receipts', async () => {
    const ok = await api(sim, `/v1/transactions/${sim.examples.transactionHash}/transaction-status`);
    expect(ok.json.results).toEqual({ data: { status: '1', description: null } });
    const bad = await api(sim, `/v1/transactions/${sim.examples.failedTransactionHash}/transaction-status`);
    expect(bad.json.results.data.status).toBe('0');
    expect(bad.json.results.data.description).toMatch(/revert|out of gas/);
    const upper = await api(sim, `/v1/transactions/0x${sim.examples.transactionHash.slice(2).toUpperCase()}/receipt-status`);
    expect(upper.json.results).toEqual({ data: { status: '1' } });
    const missing = await api(sim, `/v1/transactions/0x${'ab'.repeat(32)}/transaction-status`);
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({ status: '404', results: null });
    expect((await api(sim, '/v1/transactions/0x1234/receipt-status')).status).toBe(400);
  });

  it('pre-Byzantium transactions have no receipt status', async () => {
    const r = await api(sim, `/v1/accounts/${sim.examples.whale}/transactions?startBlock=1&endBlock=100&limit=1`);
    const h = r.json.results.data[0].transaction_hash;
    expect((await api(sim, `/v1/transactions/${h}/receipt-status`)).json.results.data.status).toBe('0');
  });
});

describe('internal transactions by hash (#13)', () => {
  it('lists a deep trace tree of one transaction; limit, no offset', async () => {
    const r = await api(sim, `/v1/transactions/${sim.examples.internalTransactionHash}/internal-transactions?input=true`);
    expect(r.status).toBe(200);
    const data = r.json.results.data;
    expect(Number(r.json.results.count)).toBe(data.length);
    expect(data.length).toBeGreaterThanOrEqual(6);
    const paths = new Set(data.map((e: any) => e.trace_address.join(',')));
    expect(Math.max(...data.map((e: any) => e.trace_address.length))).toBeGreaterThanOrEqual(4);
    for (const e of data) {
      checkInternal(e, true);
      expect(e.transaction_hash.toLowerCase()).toBe(sim.examples.internalTransactionHash);
      if (e.trace_address.length > 1) expect(paths.has(e.trace_address.slice(0, -1).join(','))).toBe(true);
      const kids = data.filter(
        (k: any) => k.trace_address.length === e.trace_address.length + 1 && k.trace_address.slice(0, -1).join(',') === e.trace_address.join(','),
      ).length;
      if (e.sub_traces !== null) expect(Number(e.sub_traces)).toBe(kids);
    }
    const lim = await api(sim, `/v1/transactions/${sim.examples.internalTransactionHash}/internal-transactions?limit=2`);
    expect(lim.json.results.data).toHaveLength(2);
    expect(lim.json.results.count).toBe(r.json.results.count);
    expect((await api(sim, `/v1/transactions/${sim.examples.internalTransactionHash}/internal-transactions?offset=1`)).status).toBe(400);
  });

  it('is served for testnet only by the testnet-alt host', async () => {
    const h = sim.testnetExamples.internalTransactionHash;
    const alt = await api(sim, `/v1/transactions/${h}/internal-transactions`, 'testnetAlt');
    expect(alt.status).toBe(200);
    expect(Number(alt.json.results.count)).toBeGreaterThan(0);
    const main = await api(sim, `/v1/transactions/${h}/internal-transactions`, 'testnet');
    expect(main.status).toBe(404);
    expect(main.json.message).toMatch(/testnet-alt/);
    const other = await api(sim, `/v1/accounts/${sim.testnetExamples.whale}/transactions`, 'testnetAlt');
    expect(other.status).toBe(404);
    const tn = await api(sim, `/v1/accounts/${sim.testnetExamples.whale}/transactions?limit=1`, 'testnet');
    expect(Number(tn.json.results.count)).toBeGreaterThan(1000);
    // mainnet and testnet are different chains
    expect((await api(sim, `/v1/transactions/${h}/transaction-status`)).status).toBe(404);
  });
});

describe('contracts (#14-#16)', () => {
  it('verified contracts return ABI and code', async () => {
    const abi = await api(sim, `/v1/contracts/${sim.examples.verifiedContract}/abi`);
    expect(abi.status).toBe(200);
    const items = abi.json.results.data;
    expect(Array.isArray(items)).toBe(true);
    for (const it of items) {
      expect(['constructor', 'event', 'function']).toContain(it.type);
      if (it.type === 'constructor') expect(it.name).toBeUndefined();
      else expect(typeof it.name).toBe('string');
      for (const p of it.inputs) {
        expect(typeof p.type).toBe('string');
        expect(typeof p.internalType).toBe('string');
        if (it.type === 'event') expect(typeof p.indexed).toBe('boolean');
      }
      if (it.type === 'event') expect(it.anonymous).toBe(false);
      if (it.type === 'function') expect(Array.isArray(it.outputs)).toBe(true);
    }
    const code = await api(sim, `/v1/contracts/${sim.examples.erc20Token}/code`);
    const d = code.json.results.data;
    expect(Object.keys(d)).toEqual([
      'address',
      'logo',
      'compiler',
      'libraries',
      'verify_date',
      'contract_name',
      'runs_optimizer',
      'optimization_enabled',
      'contract_code',
      'contract_abi',
      'contract_source',
      'constructor_arguments',
      'swarm source',
      'verify_status',
      'verify_message',
    ]);
    expect(Array.isArray(d.contract_abi)).toBe(true);
    expect(Buffer.from(d.contract_source, 'base64').toString('utf8')).toContain('contract ' + d.contract_name);
    expect(d.contract_code).toMatch(/^0x[0-9a-f]+$/);
    expect(d.verify_date).toMatch(ISO_SECONDS);
  });

  it('unverified contracts and plain accounts answer with an error envelope', async () => {
    for (const a of [sim.examples.unverifiedContract, sim.examples.whale]) {
      for (const p of ['abi', 'code']) {
        const r = await api(sim, `/v1/contracts/${a}/${p}`);
        expect(r.status).toBe(404);
        expect(r.json.message).toMatch(/not verified/);
        expect(r.json.results).toBeNull();
      }
    }
  });

  it('POST verify verifies a contract whose source names it', async () => {
    const s2 = await startSimulator();
    try {
      const c = s2.examples.unverifiedContract;
      const url = `${s2.urls.mainnet}/v1/contracts/${c}/verify`;
      const h = { 'api-key': s2.apiKey };
      const src = Buffer.from('pragma solidity ^0.8.19;\ncontract Vault {}\n').toString('base64');
      const body = {
        contract_name: 'Vault',
        compiler: 'v0.8.19+commit.7dd6d404',
        runs_optimizer: 200,
        optimization_enabled: 1,
        contract_source: src,
        constructor_arguments: '',
        libraries: [],
      };
      const wrong = await post(url, { ...body, contract_name: 'Other' }, h);
      expect(wrong.json).toEqual({ status: '200', message: 'Fail - Unable to verify: the source does not declare contract Other', results: '0' });
      expect((await post(url, { compiler: 'x' }, h)).status).toBe(400);
      expect((await post(url, { ...body, contract_source: '%%%' }, h)).status).toBe(400);
      expect((await post(url, { ...body, runs_optimizer: 'many' }, h)).status).toBe(400);
      const ok = await post(url, body, h);
      expect(ok.json.results).toBe('1');
      const code = await (await import('./helpers.js')).get(`${s2.urls.mainnet}/v1/contracts/${c}/code`, h);
      expect(code.status).toBe(200);
      expect(code.json.results.data.contract_source).toBe(src);
      expect(code.json.results.data.contract_name).toBe('Vault');
      const eoa = await post(`${s2.urls.mainnet}/v1/contracts/${s2.examples.whale}/verify`, body, h);
      expect(eoa.json.results).toBe('0');
    } finally {
      await s2.close();
    }
  });
});

const LOG_FIELDS = [
  'timestamp',
  'address',
  'data',
  'method',
  'transaction_hash',
  'log_name',
  'log_abi',
  'address_type',
  'address_extra',
  'transaction_index',
  'log_index',
  'topics_count',
  'topic_0',
  'topic_1',
  'topic_2',
  'topic_3',
];

describe('GET /v1/event-logs (#18)', () => {
  it('returns typed Transfer logs of a token matching the ERC-20 transfers', async () => {
    const a = sim.examples.addresses[1]!;
    const token = sim.examples.erc20Token;
    const q = `/v1/event-logs?address=${token}&topic_0=${sim.examples.transferTopic}&topic_1=${padTopic(a)}&topic_2=${padTopic(a)}&operand=or&limit=1000`;
    const r = await api(sim, q);
    expect(r.status).toBe(200);
    const logs = r.json.results.data;
    for (const e of logs) {
      expect(Object.keys(e)).toEqual(LOG_FIELDS);
      for (const f of LOG_FIELDS) expect(e[f] === null || typeof e[f] === 'string').toBe(true);
      expect(e.topic_0).toBe(sim.examples.transferTopic);
      expect([e.topic_1, e.topic_2]).toContain(padTopic(a));
      expect(e.topics_count).toBe('3');
      expect(e.topic_3).toBeNull();
      expect(e.log_name).toBe('Transfer');
    }
    const transfers = (await api(sim, `/v1/accounts/${a}/token-transfer/erc20?limit=1000`)).json.results.data.filter(
      (t: any) => t.token_address.toLowerCase() === token,
    );
    expect(logs.length).toBe(transfers.length);
    expect(logs.map((l: any) => l.transaction_hash.toLowerCase())).toEqual(transfers.map((t: any) => t.transaction_hash.toLowerCase()));
    expect(logs.map((l: any) => BigInt(l.data).toString())).toEqual(transfers.map((t: any) => t.value));
    const and = await api(
      sim,
      `/v1/event-logs?address=${token}&topic_0=${sim.examples.transferTopic}&topic_1=${padTopic(a)}&topic_2=${padTopic(a)}&type=combine&operand=and`,
    );
    expect(and.json.results.count).toBe('0');
    const single = await api(sim, `/v1/event-logs?address=${token}&topic_0=${sim.examples.transferTopic}&topic_1=${padTopic(a)}&type=single&limit=1`);
    const allLogs = await api(sim, `/v1/event-logs?address=${token}&topic_0=${sim.examples.transferTopic}&limit=1`);
    expect(single.json.results.count).toBe(allLogs.json.results.count);
    const mints = await api(sim, `/v1/event-logs?address=${token}&topic_0=${sim.examples.transferTopic}&topic_1=${ZERO_TOPIC}&limit=5`);
    for (const e of mints.json.results.data) expect(e.topic_1).toBe(ZERO_TOPIC);
  });

  it('block range, paging and unnamed logs with null topics', async () => {
    const pool = sim.examples.pools[0]!;
    const swaps = await api(sim, `/v1/event-logs?address=${pool}&topic_0=${'0x' + '0'.repeat(64)}&limit=5`);
    expect(swaps.json.results.count).toBe('0');
    // find the unnamed log topic through a transaction of the pool
    const page = await api(sim, `/v1/event-logs?address=${pool}&topic_0=${sim.examples.transferTopic}`);
    expect(page.json.results.count).toBe('0');
    const topicSwap = '0x' + (await import('../../src/evm/keccak.js')).keccak256Hex('Swap(address,uint256,uint256,uint256,uint256,address)').slice(2);
    const sw = await api(sim, `/v1/event-logs?address=${pool}&topic_0=${topicSwap}&start_block=1000&end_block=3000&limit=1000`);
    expect(Number(sw.json.results.count)).toBeGreaterThan(10);
    for (const e of sw.json.results.data) {
      expect(Number(e.transaction_index)).toBeGreaterThanOrEqual(0);
      expect(e.log_name).toBe('Swap');
    }
    const topic = unnamedTopic(chainFor(1, 'small', 'mainnet'), A_POOL0);
    const un = await api(sim, `/v1/event-logs?address=${pool}&topic_0=${topic}&limit=50`);
    expect(Number(un.json.results.count)).toBeGreaterThan(50);
    for (const e of un.json.results.data) {
      expect(e).toMatchObject({ log_name: null, log_abi: null, topics_count: '1', topic_0: topic, topic_1: null, topic_2: null, topic_3: null });
    }
    const p1 = await api(sim, `/v1/event-logs?address=${pool}&topic_0=${topic}&limit=20&offset=10`);
    expect(p1.json.results.data).toEqual(un.json.results.data.slice(10, 30));
  });

  it('validates parameters', async () => {
    const t = sim.examples.transferTopic,
      tok = sim.examples.erc20Token;
    for (const [qs, msg] of [
      [`topic_0=${t}`, /address/],
      [`address=${tok}`, /topic_0/],
      [`address=${tok}&topic_0=0x12`, /topic_0/],
      [`address=${tok}&topic_0=${t}&type=both`, /type/],
      [`address=${tok}&topic_0=${t}&operand=xor`, /operand/],
      [`address=${tok}&topic_0=${t}&limit=1001`, /limit/],
      [`address=${tok}&topic_0=${t}&start_block=-1`, /start_block/],
    ] as [string, RegExp][]) {
      const r = await api(sim, `/v1/event-logs?${qs}`);
      expect(r.status, qs).toBe(400);
      expect(r.json.message).toMatch(msg);
    }
  });
});

describe('tokens (#19-#21)', () => {
  it('total supply equals the minted amounts; the max token supply is 2^256-1', async () => {
    const tok = sim.examples.erc20Token;
    const s = await api(sim, `/v1/tokens/${tok}/total-supply`);
    expect(s.json.results.data.total_supply).toMatch(UINT);
    let minted = 0n;
    for (let start = 0; start <= sim.head(); start += 12_000) {
      const q = `/v1/event-logs?address=${tok}&topic_0=${sim.examples.transferTopic}&topic_1=${ZERO_TOPIC}&start_block=${start}&end_block=${start + 11_999}`;
      const first = await api(sim, q + '&limit=1000');
      const count = Number(first.json.results.count);
      expect(count).toBeLessThan(10_000);
      for (let off = 0; off < count; off += 1000) {
        const p = off === 0 ? first : await api(sim, `${q}&limit=1000&offset=${off}`);
        for (const e of p.json.results.data) minted += BigInt(e.data);
      }
    }
    expect(minted.toString()).toBe(s.json.results.data.total_supply);
    const holder = sim.examples.addresses[4]!;
    const t = await api(sim, `/v1/accounts/${holder}/token-transfer/erc20?limit=1000`);
    const weird = t.json.results.data.find((e: any) => e.token_name === null).token_address;
    expect((await api(sim, `/v1/tokens/${weird}/total-supply`)).json.results.data.total_supply).toBe(MAX);
    expect((await api(sim, `/v1/tokens/${weird}/balance/${holder}`)).json.results.data.balance).toBe(MAX);
    expect((await api(sim, `/v1/tokens/${sim.examples.whale}/total-supply`)).status).toBe(404);
  });

  it('inventory of an NFT contract, whole and per holder (#21, #23)', async () => {
    const nft = sim.examples.erc721Token;
    const all = await api(sim, `/v1/tokens/${nft}/inventory?limit=1000`);
    const res = all.json.results;
    expect(Object.keys(res)).toEqual(['count', 'token_name', 'token_symbol', 'data']);
    expect(typeof res.token_name).toBe('string');
    const supply = await api(sim, `/v1/tokens/${nft}/total-supply`);
    expect(res.count).toBe(supply.json.results.data.total_supply);
    for (const e of res.data) expect(Object.keys(e)).toEqual(['holder_address', 'token_id', 'token_uri']);
    const g = await api(sim, `/v1/erc-721/${nft}/inventory?limit=1000`);
    expect(g.json.results).toEqual(res);
    const mine = await api(sim, `/v1/tokens/${nft}/inventory/${sim.examples.nftHolder}?limit=1000`);
    const bal = await api(sim, `/v1/tokens/${nft}/balance/${sim.examples.nftHolder}`);
    expect(mine.json.results.count).toBe(bal.json.results.data.balance);
    for (const e of mine.json.results.data) expect(e.holder_address.toLowerCase()).toBe(sim.examples.nftHolder);
  });
});

describe('ERC-721 group (#22-#25)', () => {
  it('token-transfer requires startBlock and returns the long entry', async () => {
    const h = sim.examples.nftHolder;
    expect((await api(sim, `/v1/erc-721/${h}/token-transfer`)).status).toBe(400);
    const r = await api(sim, `/v1/erc-721/${h}/token-transfer?startBlock=0&limit=50`);
    expect(r.status).toBe(200);
    const fields = [
      'nonce',
      'timestamp',
      'sender',
      'receiver',
      'confirmations',
      'standard',
      'block_number',
      'transaction_hash',
      'block_hash',
      'token_address',
      'token_id',
      'token_uri',
      'token_name',
      'token_symbol',
      'token_decimals',
      'transaction_index',
      'gas_limit',
      'gas_price',
      'gas_used',
      'cumulative_gas_used',
    ];
    for (const e of r.json.results.data) {
      expect(Object.keys(e)).toEqual(fields);
      for (const f of fields) expect(e[f] === null || typeof e[f] === 'string').toBe(true);
      expect(e.standard).toBe('ERC-721');
      expect(e.transaction_hash).toMatch(HASH);
    }
    const acc = await api(sim, `/v1/accounts/${h}/token-transfer/erc721?limit=50`);
    expect(r.json.results.count).toBe(acc.json.results.count);
    const ranged = await api(sim, `/v1/erc-721/${h}/token-transfer?startBlock=10000&endBlock=20000&limit=1000`);
    for (const e of ranged.json.results.data) expect(Number(e.block_number)).toBeGreaterThanOrEqual(10000);
  });
});

describe('blocks, validation and routing', () => {
  it('returns 404 envelopes for unknown paths and 400 for malformed ids', async () => {
    for (const p of ['/v1/nothing', '/v2/blocks/1', '/v1/accounts', '/v1/tokens/x']) {
      const r = await api(sim, p);
      expect(r.status).toBe(404);
      expect(r.json.status).toBe('404');
    }
    const root = await (await import('./helpers.js')).get(sim.urls.mainnet.replace('/mainnet', '/elsewhere/v1/blocks/1'), { 'api-key': sim.apiKey });
    expect(root.status).toBe(404);
    expect((await api(sim, '/v1/blocks/%E0%A4%A')).status).toBe(400);
    for (const p of [`/v1/tokens/0x12/total-supply`, `/v1/contracts/xyz/abi`, `/v1/erc-721/0x${'z'.repeat(40)}/tokens`, '/v1/blocks/-5']) {
      expect((await api(sim, p)).status, p).toBe(400);
    }
  });

  it('every listing rejects limit above 1000 and offsets past the result window', async () => {
    const a = sim.examples.whale,
      n = sim.examples.erc721Token;
    const listings = [
      `/v1/accounts/${a}/transactions`,
      `/v1/accounts/${a}/internal-transactions`,
      `/v1/accounts/${a}/token-transfer/erc20`,
      `/v1/accounts/${a}/token-transfer/erc721`,
      `/v1/accounts/${a}/tokens`,
      `/v1/accounts/${a}/tokens/erc20`,
      `/v1/accounts/${a}/tokens/erc721`,
      `/v1/accounts/${a}/tokens/inventory`,
      `/v1/accounts/${a}/mined-blocks`,
      `/v1/tokens/${n}/inventory`,
      `/v1/erc-721/${a}/tokens`,
      `/v1/erc-721/${n}/inventory`,
      `/v1/erc-721/${a}/contracts`,
      `/v1/erc-721/${a}/token-transfer?startBlock=0`,
      `/v1/event-logs?address=${n}&topic_0=${sim.examples.transferTopic}`,
    ];
    for (const l of listings) {
      const sep = l.includes('?') ? '&' : '?';
      const big = await api(sim, `${l}${sep}limit=1001`);
      expect(big.status, l).toBe(400);
      const deep = await api(sim, `${l}${sep}limit=1000&offset=9001`);
      expect(deep.status, l).toBe(400);
      expect(deep.json.message).toMatch(/Result window/);
      const ok = await api(sim, `${l}${sep}limit=1000`);
      expect(ok.status, l).toBe(200);
      expect(ok.json.status).toBe('200');
    }
  });
});
