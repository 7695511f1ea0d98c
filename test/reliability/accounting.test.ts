import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { fingerprint, type LakePrint } from './fingerprint.js';
import { startProxy, type Proxy } from './proxy.js';

/**
 * The run report accounts for every request the run sends, also when the pager throws pages away: a window
 * refetched after count drift or after learning a smaller result window abandons the pages it had in flight
 * or prefetched, and their requests (and the refused ones) still count in that window. Checked against what
 * the server saw, request for request, with the lake equal to a plain run's.
 */
let sim: RunningSimulator;
let capped: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let clean: LakePrint;
// 426, 899 and 1,496 transactions at the small scale: 9, 18 and 30 pages of 50.
const ADDRESSES = ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c', '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157', '0x86024fd52bd9a84f6ba8cb499555b9ce10959591'];

const job = (lake: string) =>
  parseJob(
    {
      name: 'accounting',
      target: 'simulator',
      lake,
      range: { fromBlock: 0, toBlock: 'head' },
      pageSize: 50,
      concurrency: 8,
      datasets: { transactions: { addresses: ADDRESSES } },
    },
    'accounting-test',
    process.env,
  );

/** Requests the proxy passed on. */
const passed = (proxy: Proxy): number => [...proxy.seen.values()].reduce((a, b) => a + b, 0);

beforeAll(async () => {
  sim = await startSimulator({ seed: 1, scale: 'small' });
  // The same chain behind an API whose result window is 300 rows: the job (10,000) learns it from the error.
  capped = await startSimulator({ seed: 1, scale: 'small', resultWindow: 300 });
  ({ dir, cleanup } = await tempDir('chainlake-accounting-'));
  const report = await runJob(job(path.join(dir, 'clean')), { simulator: { urls: sim.urls, apiKey: sim.apiKey } });
  expect(report.status).toBe('complete');
  expect(report.totals.requests).toBe(sim.stats().requests);
  clean = await fingerprint(path.join(dir, 'clean'));
  expect(clean.transactions?.rows).toBeGreaterThan(2_500); // 2,821 listed, a transaction between two of them once
}, 120_000);
afterAll(async () => {
  await sim?.close();
  await capped?.close();
  await cleanup?.();
});

describe('accounting of abandoned pages', () => {
  it('count drift: the pages in flight when a window is refetched still count', async () => {
    const [A] = ADDRESSES;
    let drifted = 0;
    const proxy = await startProxy(sim, (url, status, body) => {
      // Once: A's page at offset 100 reports one row more than the listing had, so the pager refetches A's
      // window while its later pages are in flight.
      if (drifted > 0 || status !== 200 || !url.pathname.endsWith(`/accounts/${A}/transactions`) || url.searchParams.get('offset') !== '100') return undefined;
      drifted++;
      const env = JSON.parse(body) as { results: { count: string } };
      env.results.count = String(Number(env.results.count) + 1);
      return { body: JSON.stringify(env) };
    });
    try {
      sim.resetStats();
      const lake = path.join(dir, 'drift');
      const report = await runJob(job(lake), { simulator: { urls: proxy.urls, apiKey: sim.apiKey } });
      expect(drifted).toBe(1);
      expect(report.errors).toEqual([]);
      const seen = passed(proxy);
      expect(report.totals.requests).toBe(sim.stats().requests);
      expect(report.totals.requests).toBe(seen);
      expect(report.outsideWindows).toEqual({ requests: 1, retries: 0, throttles: 0 });
      // A's window took its 9 pages twice over, less what the first pass had not launched yet: more than 9.
      const aRequests = proxy.seen.get(`/mainnet/v1/accounts/${A}/transactions`)!;
      expect(aRequests).toBeGreaterThan(9);
      const [w] = await queryCatalog(lake, `SELECT sum(requests)::INT AS requests FROM windows WHERE scope ILIKE '%${A}%'`);
      expect(w!.requests).toBe(aRequests);
      expect(await fingerprint(lake)).toEqual(clean);
      console.log(`reliability/accounting (drift): A's window sent ${aRequests} requests for 9 pages; report ${report.totals.requests} = server ${seen}`);
    } finally {
      await proxy.close();
    }
  });

  it('a learned result window: the refused requests and the pages prefetched past the cap still count', async () => {
    const proxy = await startProxy(capped);
    let refused = 0;
    proxy.setRewrite((_url, status) => {
      if (status === 400) refused++;
      return undefined;
    });
    try {
      capped.resetStats();
      const lake = path.join(dir, 'capped');
      const report = await runJob(job(lake), { simulator: { urls: proxy.urls, apiKey: capped.apiKey } });
      expect(report.errors).toEqual([]);
      expect(refused).toBeGreaterThan(0);
      const seen = passed(proxy);
      expect(report.totals.requests).toBe(capped.stats().requests);
      expect(report.totals.requests).toBe(seen);
      // Every refusal is a terminal failure counted where it was sent; none is retried.
      expect(report.failures).toEqual({ 'http-4xx': refused });
      expect(report.totals.retries).toBe(0);
      const [w] = await queryCatalog(lake, `SELECT sum(requests)::INT AS requests, sum(cap_hits)::INT AS cap_hits FROM windows`);
      expect(w!.requests).toBe(seen - 1);
      expect(w!.cap_hits).toBeGreaterThan(0);
      expect(await fingerprint(lake)).toEqual(clean);
      console.log(
        `reliability/accounting (learned cap): ${refused} requests refused past the API's 300-row window; report ${report.totals.requests} = server ${seen}`,
      );
    } finally {
      await proxy.close();
    }
  });
});
