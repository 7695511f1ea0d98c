import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { api, get } from './helpers.js';

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator();
});
afterAll(async () => {
  await sim.close();
});

const path = (): string => `/v1/accounts/${sim.examples.addresses[0]}/transactions?limit=20`;

async function raw(
  url: string,
  opts: { headersTimeout?: number } = {},
): Promise<{ status: number; headers: Record<string, unknown>; text: string } | { error: string }> {
  try {
    const r = await request(url, { headers: { 'api-key': sim.apiKey }, headersTimeout: opts.headersTimeout ?? 10_000, bodyTimeout: 10_000 });
    return { status: r.statusCode, headers: r.headers, text: await r.body.text() };
  } catch (e) {
    return { error: (e as Error & { code?: string }).code ?? (e as Error).message };
  }
}

describe('fault injection', () => {
  it('429 with Retry-After, throttle envelope in HTTP 200, 500/502/503', async () => {
    sim.setFaults({ rate: 1, kinds: ['429'], retryAfterSeconds: 3 });
    const r429 = await api(sim, path());
    expect(r429.status).toBe(429);
    expect(r429.headers['retry-after']).toBe('3');
    expect(r429.json).toMatchObject({ status: '429', results: null });
    sim.setFaults({ rate: 1, kinds: ['throttle'] });
    const thr = await api(sim, path());
    expect(thr.status).toBe(200);
    expect(thr.json).toEqual({ status: '429', message: 'Too many requests', results: null });
    const fin = await get(sim.urls.finance + '/dashboard/overview');
    expect(fin.status).toBe(200);
    expect(fin.json).toEqual({ type: 'failure', message: 'Too many requests', data: null });
    for (const k of ['500', '502', '503'] as const) {
      sim.setFaults({ rate: 1, kinds: [k] });
      const r = await api(sim, path());
      expect(r.status).toBe(Number(k));
      expect(r.json.status).toBe(k);
      if (k === '503') expect(r.headers['retry-after']).toBe('1');
    }
    sim.setFaults(undefined);
    expect((await api(sim, path())).status).toBe(200);
  });

  it('connection reset, truncated body and non-JSON body', async () => {
    sim.setFaults({ rate: 1, kinds: ['reset'] });
    const reset = await raw(sim.urls.mainnet + path());
    expect('error' in reset).toBe(true);
    sim.setFaults({ rate: 1, kinds: ['truncated'] });
    const cut = await raw(sim.urls.mainnet + path());
    if ('error' in cut) throw new Error(cut.error);
    expect(cut.status).toBe(200);
    expect(Number(cut.headers['content-length'])).toBe(Buffer.byteLength(cut.text));
    expect(() => JSON.parse(cut.text)).toThrow();
    expect(cut.text.startsWith('{"status":"200"')).toBe(true);
    sim.setFaults({ rate: 1, kinds: ['non-json'] });
    const html = await raw(sim.urls.mainnet + path());
    if ('error' in html) throw new Error(html.error);
    expect(html.status).toBe(200);
    expect(String(html.headers['content-type'])).toMatch(/text\/html/);
    expect(html.text).toMatch(/<html>/);
    sim.setFaults(undefined);
  });

  it('stall holds the request until the client gives up, or closes after stallMs', async () => {
    sim.setFaults({ rate: 1, kinds: ['stall'], stallMs: 60_000 });
    const t0 = performance.now();
    const gaveUp = await raw(sim.urls.mainnet + path(), { headersTimeout: 150 });
    expect('error' in gaveUp).toBe(true);
    expect(performance.now() - t0).toBeLessThan(5_000);
    sim.setFaults({ rate: 1, kinds: ['stall'], stallMs: 100 });
    const closed = await raw(sim.urls.mainnet + path());
    expect('error' in closed).toBe(true);
    sim.setFaults(undefined);
    expect((await api(sim, path())).status).toBe(200);
  });

  it('a seeded fault rate is deterministic and close to the rate', async () => {
    const run = async (): Promise<number[]> => {
      const s = await startSimulator({ faults: { rate: 0.3, seed: 7, kinds: ['500', '429', 'throttle'] } });
      try {
        const out: number[] = [];
        for (let i = 0; i < 60; i++) {
          const r = await get(s.urls.mainnet + '/v1/blocks/latest', { 'api-key': s.apiKey });
          out.push(r.status === 200 && r.json.status === '200' ? 0 : r.status === 200 ? 1 : r.status);
        }
        const st = s.stats();
        expect(Object.values(st.faults).reduce((a, b) => a + b, 0)).toBe(out.filter((x) => x !== 0).length);
        return out;
      } finally {
        await s.close();
      }
    };
    const a = await run(),
      b = await run();
    expect(a).toEqual(b);
    const faulted = a.filter((x) => x !== 0).length;
    expect(faulted).toBeGreaterThan(6);
    expect(faulted).toBeLessThan(36);
  });

  it('latency delays responses', async () => {
    sim.setLatency(80);
    const t0 = performance.now();
    await api(sim, '/v1/blocks/latest');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(75);
    sim.setLatency({ min: 0, max: 5 });
    await api(sim, '/v1/blocks/latest');
    sim.setLatency(undefined);
    expect(() => sim.setLatency({ min: 5, max: 1 })).toThrow();
  });
});

describe('server-side rate limit', () => {
  it('answers 429 with Retry-After once the bucket is empty', async () => {
    const s = await startSimulator({ rateLimit: { rps: 0.5, burst: 2 } });
    try {
      const statuses: number[] = [];
      let retryAfter: unknown;
      for (let i = 0; i < 5; i++) {
        const r = await get(s.urls.mainnet + '/v1/blocks/latest', { 'api-key': s.apiKey });
        statuses.push(r.status);
        if (r.status === 429) {
          retryAfter = r.headers['retry-after'];
          expect(r.json.status).toBe('429');
        }
      }
      expect(statuses.slice(0, 2)).toEqual([200, 200]);
      expect(statuses.filter((x) => x === 429).length).toBeGreaterThanOrEqual(2);
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
      expect(s.stats().rateLimited).toBe(statuses.filter((x) => x === 429).length);
      s.setRateLimit(undefined);
      expect((await get(s.urls.mainnet + '/v1/blocks/latest', { 'api-key': s.apiKey })).status).toBe(200);
    } finally {
      await s.close();
    }
  });
});

describe('moving head', () => {
  it('advanceHead reveals new blocks and transactions deterministically', async () => {
    const s = await startSimulator();
    try {
      const h0 = s.head();
      const w = s.examples.whale;
      const before = await get(`${s.urls.mainnet}/v1/accounts/${w}/transactions?limit=1`, { 'api-key': s.apiKey });
      expect((await get(`${s.urls.mainnet}/v1/blocks/${h0 + 5}`, { 'api-key': s.apiKey })).status).toBe(404);
      s.advanceHead(5);
      expect(s.head()).toBe(h0 + 5);
      const latest = await get(`${s.urls.mainnet}/v1/blocks/latest`, { 'api-key': s.apiKey });
      expect(latest.json.results.data.block_number).toBe(String(h0 + 5));
      const after = await get(`${s.urls.mainnet}/v1/accounts/${w}/transactions?limit=1`, { 'api-key': s.apiKey });
      expect(Number(after.json.results.count)).toBeGreaterThan(Number(before.json.results.count));
      // rows already visible never change, apart from confirmations
      const old = await get(`${s.urls.mainnet}/v1/accounts/${w}/transactions?limit=50&endBlock=${h0}`, { 'api-key': s.apiKey });
      const ref = await get(`${sim.urls.mainnet}/v1/accounts/${w}/transactions?limit=50&endBlock=${h0}`, { 'api-key': sim.apiKey });
      const strip = (d: any[]): any[] => d.map(({ confirmations, ...rest }) => rest);
      expect(strip(old.json.results.data)).toEqual(strip(ref.json.results.data));
      expect(Number(old.json.results.data[0].confirmations)).toBe(Number(ref.json.results.data[0].confirmations) + 5);
      expect(s.stats().head.mainnet).toBe(h0 + 5);
      const t0 = s.head('testnet');
      s.advanceHead(3, 'testnet');
      expect(s.head('testnet')).toBe(t0 + 3);
      expect(s.stats().head.testnet).toBe(t0 + 3);
      expect(() => s.advanceHead(-1)).toThrow();
      expect(sim.head()).toBe(h0); // heads are per simulator
    } finally {
      await s.close();
    }
  });

  it('blockTimeMs moves the head while serving', async () => {
    const s = await startSimulator({ blockTimeMs: 10 });
    try {
      const h0 = s.head();
      for (let i = 0; i < 200 && s.head() < h0 + 3; i++) await new Promise((r) => setTimeout(r, 10));
      expect(s.head()).toBeGreaterThanOrEqual(h0 + 3);
      const latest = await get(`${s.urls.mainnet}/v1/blocks/latest`, { 'api-key': s.apiKey });
      expect(Number(latest.json.results.data.block_number)).toBeGreaterThan(h0);
    } finally {
      await s.close();
    }
  });
});

describe('stats', () => {
  it('counts requests, rows, routes and faults; /_sim/stats serves them', async () => {
    const s = await startSimulator();
    try {
      await get(`${s.urls.mainnet}/v1/accounts/${s.examples.whale}/transactions?limit=7`, { 'api-key': s.apiKey });
      await get(`${s.urls.finance}/dashboard/overview`);
      s.setFaults({ rate: 1, kinds: ['500'] });
      await get(`${s.urls.mainnet}/v1/blocks/1`, { 'api-key': s.apiKey });
      s.setFaults(undefined);
      const st = s.stats();
      expect(st.requests).toBe(3);
      expect(st.rowsServed).toBe(8);
      expect(st.faults).toEqual({ '500': 1 });
      expect(st.byRoute['mainnet/accounts/transactions']).toBe(1);
      expect(st.byRoute['finance/dashboard/overview']).toBe(1);
      const http = await get(s.urls.mainnet.replace('/mainnet', '/_sim/stats'));
      expect(http.json.requests).toBe(3);
      expect(http.text).not.toContain(s.apiKey);
      s.resetStats();
      expect(s.stats().requests).toBe(0);
    } finally {
      await s.close();
    }
  });

  it('close() ends open and stalled connections', async () => {
    const s = await startSimulator({ faults: { rate: 1, kinds: ['stall'], stallMs: 60_000 } });
    const pending = request(`${s.urls.mainnet}/v1/blocks/1`, { headers: { 'api-key': s.apiKey } }).then(
      () => 'ok',
      () => 'error',
    );
    for (let i = 0; i < 100 && s.stats().requests === 0; i++) await new Promise((r) => setTimeout(r, 5));
    const t0 = performance.now();
    await s.close();
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(await pending).toBe('error');
  });
});
