import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator, type SimulatorExamples } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { apiAll } from './helpers.js';

/**
 * A bad value from the API sends its row to `_rejects` and the rest of the window still loads. The simulator
 * never sends bad values, so a loopback proxy in front of it spoils a few (our stages run unchanged).
 */
type Json = Record<string, unknown>;
let sim: RunningSimulator;
let ex: SimulatorExamples;
let proxy: http.Server;
let urls: RunningSimulator['urls'];
let cleanups: (() => Promise<void>)[] = [];

function spoil(url: URL, body: Json): Json {
  const path = url.pathname;
  // Only the first page of a listing: one bad entry per window, whatever its size.
  if ((url.searchParams.get('offset') ?? '0') !== '0') return body;
  const results = body.results as Json | undefined;
  const data = (results?.data ?? body.data) as Json[] | undefined;
  if (/\/token-transfer\/erc20$/.test(path) && data && data.length >= 3) {
    data[0]!.value = '12abc';
    data[1]!.surprise = 1;
    delete data[2]!.token_name;
  } else if (/\/tokens\/0x[0-9a-fA-F]+\/inventory$/.test(path) && data?.length) {
    data[0]!.token_id = 'NaN-id';
  } else if (path.endsWith('/pool/info_list') && data?.length) {
    (data[0]!['24h'] as Json).volume = 'n/a';
  } else if (/\/transactions\/0x[0-9a-fA-F]+\/internal-transactions$/.test(path) && data?.length) {
    data[0]!.trace_address = ['x'];
  }
  return body;
}

beforeAll(async () => {
  sim = await startSimulator({ seed: 11 });
  ex = sim.examples;
  const origin = new URL(sim.urls.mainnet).origin;
  proxy = http.createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const up = await request(origin + req.url, {
        method: req.method as 'GET' | 'POST',
        headers: Object.fromEntries(Object.entries(req.headers).filter(([k]) => k !== 'host' && k !== 'connection')) as Record<string, string>,
        body: chunks.length ? Buffer.concat(chunks) : undefined,
      });
      let text = await up.body.text();
      if (up.statusCode === 200) text = JSON.stringify(spoil(new URL(req.url!, origin), JSON.parse(text) as Json));
      res.writeHead(up.statusCode, { 'content-type': 'application/json' });
      res.end(text);
    })().catch((e: unknown) => {
      res.writeHead(500);
      res.end(String(e));
    });
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  urls = { mainnet: `${base}/mainnet`, testnet: `${base}/testnet`, testnetAlt: `${base}/testnet-alt`, finance: `${base}/finance` };
});

afterAll(async () => {
  await new Promise((r) => proxy?.close(r));
  await sim?.close();
  for (const c of cleanups) await c();
});

const job = (lake: string, strict: boolean) =>
  parseJob(
    {
      name: 'rejects',
      target: 'simulator',
      lake,
      strict,
      range: { fromBlock: 30_000 },
      datasets: {
        erc20_transfers: { addresses: [ex.addresses[5]] },
        nft_inventory: { tokens: [ex.erc721Token] },
        pool_info: { pools: [ex.pools[0]] },
        internal_transactions: { transactions: [ex.internalTransactionHash] },
      },
    },
    'rejects-test',
    process.env,
  );

describe('rejects of the new kinds', () => {
  it('a bad value sends its row to _rejects (dataset, window, field, raw value, reason); the rest loads; unknown fields reported; missing -> NULL', async () => {
    const { dir: lake, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const report = await runJob(job(lake, false), { simulator: { urls, apiKey: sim.apiKey } });
    expect(report.errors).toEqual([]);
    expect(report.status).toBe('complete');
    expect(report.totals.rejects).toBe(4);
    expect(report.unknownFields).toEqual({ erc20_transfers: ['surprise'] });

    const rejects = await queryCatalog(lake, `SELECT dataset, "window", field, raw_value, reason FROM _rejects ORDER BY dataset`);
    expect(rejects).toEqual([
      {
        dataset: 'erc20_transfers',
        window: expect.stringContaining('erc20_transfers/mainnet/address='),
        field: 'value',
        raw_value: '12abc',
        reason: expect.stringMatching(/amount/),
      },
      {
        dataset: 'internal_transactions',
        window: expect.stringContaining('transaction='),
        field: 'trace_address',
        raw_value: '["x"]',
        reason: expect.stringMatching(/small integer/),
      },
      {
        dataset: 'nft_inventory',
        window: expect.stringContaining('token='),
        field: 'token_id',
        raw_value: 'NaN-id',
        reason: expect.stringMatching(/does not match/),
      },
      { dataset: 'pool_info', window: expect.stringContaining('pool='), field: 'volume_24h', raw_value: 'n/a', reason: expect.stringMatching(/not a number/) },
    ]);

    const api = await apiAll(sim.urls.mainnet, sim.apiKey, `/v1/accounts/${ex.addresses[5]}/token-transfer/erc20`, { startBlock: 30_000 });
    const [n] = await queryCatalog(lake, `SELECT count(*)::BIGINT AS n, count(*) FILTER (WHERE token_name IS NULL)::BIGINT AS nulls FROM erc20_transfers`);
    expect(Number(n!.n)).toBe(api.length - 1);
    expect(api.length).toBeLessThan(1000); // one page: the proxy spoiled its entries 0..2
    expect(Number(n!.nulls)).toBe(api.filter((e, i) => i !== 0 && (e.token_name === null || i === 2)).length);
    const [inv] = await queryCatalog(lake, `SELECT count(*)::BIGINT AS n FROM nft_inventory`);
    expect(Number(inv!.n)).toBe((await apiAll(sim.urls.mainnet, sim.apiKey, `/v1/tokens/${ex.erc721Token}/inventory`)).length - 1);
  });

  it('--strict fails the windows that had rejects and loads none of their rows', async () => {
    const { dir: lake, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const report = await runJob(job(lake, true), { simulator: { urls, apiKey: sim.apiKey } });
    expect(report.status).not.toBe('complete');
    expect(report.errors.length).toBe(4);
    for (const e of report.errors) expect(e.error).toMatch(/strict mode/);
  });
});
