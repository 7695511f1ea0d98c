import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ExplorerClient } from '../../src/extract/explorer.js';
import { collect, minRequests, pagerOptions, transport, txFetcher } from './helpers.js';

/**
 * A measurement, not a test of speed (it asserts only what does not depend on the machine): the whale at
 * `medium` in 8 windows paged at once at `--rps R` against a simulator (own thread) limited to R req/s.
 * Run: npm run build && CHAINLAKE_BENCH=1 [CHAINLAKE_BENCH_RPS=20,40] npx vitest run test/extract/throughput.test.ts
 * (its simulator runs from dist/, which the fast tier does not build)
 * It prints requests per row against the minimum, the rate achieved against R, and the 429s drawn.
 */
const rates = (process.env.CHAINLAKE_BENCH_RPS ?? '20,40').split(',').map(Number);

describe.runIf(process.env.CHAINLAKE_BENCH === '1')('throughput at a server rate limit', () => {
  it.each(rates)(
    'R = %d req/s',
    async (R) => {
      const worker = new Worker(new URL('../../dist/simulator/bench-worker.js', import.meta.url), {
        workerData: { scale: 'medium', seed: 4, rateLimit: { rps: R }, latencyMs: { min: 10, max: 60 } },
      });
      const info: { mainnet: string; apiKey: string; whale: string } = await new Promise((resolve) => worker.once('message', resolve));
      const t = transport({ concurrency: 16, rps: R });
      try {
        const client = new ExplorerClient(t, { baseUrl: info.mainnet, apiKey: info.apiKey });
        const head = 216_000; // the medium chain's initial head
        const windows = Array.from({ length: 8 }, (_, i) => ({ from: Math.floor((head * i) / 8), to: Math.floor((head * (i + 1)) / 8) - 1 }));
        const started = performance.now();
        const cpu0 = process.cpuUsage();
        const results = await Promise.all(windows.map((r) => collect(txFetcher(client, info.whale), r, pagerOptions({ prefetch: 8 }), undefined, false)));
        const seconds = (performance.now() - started) / 1000;
        const cpu = process.cpuUsage(cpu0);
        const busy = (cpu.user + cpu.system) / 1e6 / seconds;
        const rateWait = results.reduce((a, r) => a + r.acct.rateWaitMs, 0) / 1000;
        const stats = (await (await fetch(info.mainnet.replace(/\/mainnet$/, '/_sim/stats'))).json()) as { requests: number; rateLimited: number };
        const rows = results.reduce((a, r) => a + r.count, 0);
        const min = results.reduce((a, r) => a + minRequests(r.count), 0);
        const requests = results.reduce((a, r) => a + r.acct.requests, 0);
        console.log(
          `R=${R}: ${rows} rows, ${requests} requests (minimum ${min}, ratio ${(requests / min).toFixed(3)}), ` +
            `${seconds.toFixed(1)} s, achieved ${(requests / seconds).toFixed(1)} req/s = ${((100 * requests) / seconds / R).toFixed(1)} % of R, 429s ${stats.rateLimited}; ` +
            `client CPU ${(100 * busy).toFixed(0)} % of one core, requests waited ${rateWait.toFixed(1)} s in total for the rate limiter`,
        );
        expect(requests / min).toBeLessThanOrEqual(1.05);
        expect(results.every((r) => r.count === r.progress.rowsExpected && r.keys.size === r.count)).toBe(true);
      } finally {
        await t.close();
        worker.postMessage('close');
        await new Promise((resolve) => worker.once('exit', resolve));
      }
    },
    120_000,
  );
});
