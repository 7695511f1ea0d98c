import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { transactions } from '../../src/datasets/transactions.js';
import { Accounting } from '../../src/extract/accounting.js';
import { VirtualClock } from '../../src/extract/clock.js';
import { explorerPageFetcher, ShapeError } from '../../src/extract/endpoint.js';
import { findHead } from '../../src/extract/head.js';
import { blockTimes } from '../../src/pipeline/block-times.js';
import { ApiError, redactUrl } from '../../src/extract/errors.js';
import { checkExplorerEnvelope, ExplorerClient } from '../../src/extract/explorer.js';
import { classifyStatus, HttpTransport, parseRetryAfter, type TransportOptions } from '../../src/extract/transport.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { envelope, ok, ScriptedServer, type ScriptedReply } from './scripted-server.js';

/**
 * The transport's failure classes, retry policy and timing. Time is a virtual clock that jumps on every
 * sleep (nothing really waits); the HTTP is real, against the simulator or a scripted loopback server.
 */

const START = Date.parse('2030-01-01T00:00:00Z');
const BASE = 100;

function setup(opts: Partial<TransportOptions> = {}): { t: HttpTransport; clock: VirtualClock; acct: Accounting } {
  const clock = new VirtualClock(START, true);
  const t = new HttpTransport({ concurrency: 2, clock, retry: { maxAttempts: 6, baseDelayMs: BASE, maxDelayMs: 2_000, maxTotalDelayMs: 60_000 }, ...opts });
  return { t, clock, acct: new Accounting() };
}

const client = (t: HttpTransport, baseUrl: string, apiKey?: string): ExplorerClient => new ExplorerClient(t, { baseUrl, apiKey });

async function scripted(replies: ScriptedReply[], run: (s: ScriptedServer) => Promise<void>, delayMs = 0): Promise<void> {
  const s = await new ScriptedServer(replies, delayMs).start();
  try {
    await run(s);
  } finally {
    await s.close();
  }
}

const caught = async (p: Promise<unknown>): Promise<ApiError> => {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(ApiError);
  return e as ApiError;
};

describe('transport against the simulator', () => {
  let sim: RunningSimulator;
  let latest: string;
  beforeAll(async () => {
    sim = await startSimulator({ seed: 5 });
    latest = '/v1/blocks/latest';
  });
  afterAll(async () => {
    await sim?.close();
  });

  it.each([
    ['no key', undefined, 401, 'Missing api-key header'],
    ['a wrong key', 'not-the-key-0123456789', 403, 'Invalid api-key'],
  ])('with %s fails fast: one request, no retry, a complete message', async (_, key, status, message) => {
    const { t, clock, acct } = setup();
    sim.resetStats();
    try {
      const e = await caught(client(t, sim.urls.mainnet, key).get('explorer #17', latest, {}, acct));
      expect(e.details).toMatchObject({
        kind: 'terminal',
        reason: 'http-4xx',
        attempt: 1,
        httpStatus: status,
        envelopeStatus: String(status),
        apiMessage: message,
      });
      expect(e.details.endpoint).toBe('explorer #17');
      expect(e.details.url).toBe(`${sim.urls.mainnet}${latest}`);
      expect(e.message).toContain(`http=${status}`);
      expect(e.message).toContain(JSON.stringify(message));
      if (key) expect(e.message).not.toContain(key);
      expect(sim.stats().requests).toBe(1);
      expect(clock.sleeps).toEqual([]);
      expect(acct).toMatchObject({ requests: 1, retries: 0, failures: { 'http-4xx': 1 } });
    } finally {
      await t.close();
    }
  });

  it('400 and 404 are terminal too', async () => {
    const { t, clock, acct } = setup();
    try {
      const c = client(t, sim.urls.mainnet, sim.apiKey);
      const bad = await caught(c.get('explorer #2', '/v1/accounts/0x123/transactions', {}, acct));
      expect(bad.details).toMatchObject({ kind: 'terminal', httpStatus: 400, attempt: 1 });
      expect(bad.details.apiMessage).toMatch(/address/i);
      const missing = await caught(c.get('explorer #17', `/v1/blocks/${sim.head() + 1000}`, {}, acct));
      expect(missing.details).toMatchObject({ kind: 'terminal', httpStatus: 404, attempt: 1 });
      expect(clock.sleeps).toEqual([]);
    } finally {
      await t.close();
    }
  });

  it('honours Retry-After in seconds, then succeeds', async () => {
    const { t, clock, acct } = setup({ random: () => 0.5 });
    sim.setFaults({ rate: 1, kinds: ['429'], retryAfterSeconds: 3 });
    clock.onSleep = () => {
      if (clock.sleeps.length === 2) sim.setFaults(undefined);
    };
    try {
      const results = await client(t, sim.urls.mainnet, sim.apiKey).get('explorer #17', latest, {}, acct);
      expect(results).toHaveProperty('data.block_number');
      // At least what the server asked, plus at most one base delay of jitter.
      expect(clock.sleeps).toEqual([3000 + 0.5 * BASE, 3000 + 0.5 * BASE]);
      expect(acct).toMatchObject({ requests: 3, retries: 2, throttles: 2, failures: { 'http-429': 2 } });
      expect(acct.backoffWaitMs).toBe(2 * (3000 + 0.5 * BASE));
    } finally {
      sim.setFaults(undefined);
      await t.close();
    }
  });

  it('`Retry-After: 0` never becomes a hot loop', async () => {
    const { t, clock, acct } = setup({ random: () => 0 });
    sim.setFaults({ rate: 1, kinds: ['429'], retryAfterSeconds: 0 });
    clock.onSleep = () => {
      if (clock.sleeps.length === 3) sim.setFaults(undefined);
    };
    try {
      await client(t, sim.urls.mainnet, sim.apiKey).get('explorer #17', latest, {}, acct);
      expect(clock.sleeps).toHaveLength(3);
      for (const s of clock.sleeps) expect(s).toBeGreaterThanOrEqual(BASE);
    } finally {
      sim.setFaults(undefined);
      await t.close();
    }
  });

  it.each([
    ['throttle', 'throttle', true],
    ['500', 'http-5xx', false],
    ['502', 'http-5xx', false],
    ['503', 'http-5xx', false],
    ['reset', 'network', false],
    ['truncated', 'bad-body', false],
    ['non-json', 'bad-body', false],
  ] as const)('a %s fault is transient: retried, counted by reason, then the call succeeds', async (kind, reason, throttled) => {
    const { t, clock, acct } = setup({ random: () => 0.5 });
    sim.setFaults({ rate: 1, kinds: [kind], retryAfterSeconds: 0 });
    clock.onSleep = () => sim.setFaults(undefined);
    try {
      const results = await client(t, sim.urls.mainnet, sim.apiKey).get('explorer #17', latest, {}, acct);
      expect(results).toHaveProperty('data.block_number');
      expect(acct.failures).toEqual({ [reason]: 1 });
      expect(acct).toMatchObject({ requests: 2, retries: 1, throttles: throttled ? 1 : 0 });
      expect(clock.sleeps).toHaveLength(1);
    } finally {
      sim.setFaults(undefined);
      await t.close();
    }
  });

  it('survives a stalled server: the header timeout cuts the attempt, the retry succeeds', async () => {
    // Long enough that a loaded machine's normal reply is never cut; the stall would last a minute.
    const { t, clock, acct } = setup({ timeouts: { headersMs: 1000 } });
    sim.setFaults({ rate: 1, kinds: ['stall'], stallMs: 60_000 });
    clock.onSleep = () => sim.setFaults(undefined);
    try {
      const results = await client(t, sim.urls.mainnet, sim.apiKey).get('explorer #17', latest, {}, acct);
      expect(results).toHaveProperty('data.block_number');
      expect(acct.failures).toEqual({ timeout: 1 });
      expect(acct.requests).toBe(2);
    } finally {
      sim.setFaults(undefined);
      await t.close();
    }
  });

  it('the total timeout cuts an attempt however the time is spent', async () => {
    const { t, acct } = setup({ timeouts: { headersMs: 10_000, totalMs: 150 }, retry: { maxAttempts: 1 } });
    sim.setFaults({ rate: 1, kinds: ['stall'], stallMs: 60_000 });
    try {
      const e = await caught(client(t, sim.urls.mainnet, sim.apiKey).get('explorer #17', latest, {}, acct));
      expect(e.details).toMatchObject({ kind: 'transient', reason: 'timeout', attempt: 1 });
      expect(e.message).toMatch(/gave up after 1 attempts; last: timeout/);
    } finally {
      sim.setFaults(undefined);
      await t.close();
    }
  });
});

describe('transport against scripted replies', () => {
  it('backs off exponentially with full jitter, capped', async () => {
    await scripted(
      [{ status: 500, body: envelope('500', 'boom') }, { status: 500 }, { status: 500 }, { status: 500 }, { status: 500 }, ok({ data: 1 })],
      async (s) => {
        const { t, clock, acct } = setup({ random: () => 0.999999 });
        await client(t, s.url).get('x', '/v1/x', {}, acct);
        expect(clock.sleeps.map(Math.round)).toEqual([100, 200, 400, 800, 1600]);
        await t.close();
      },
    );
    await scripted([{ status: 502 }, { status: 502 }, { status: 502 }, ok({ data: 1 })], async (s) => {
      const { t, clock, acct } = setup({ random: () => 0.25 });
      await client(t, s.url).get('x', '/v1/x', {}, acct);
      expect(clock.sleeps).toEqual([25, 50, 100]);
      await t.close();
    });
    await scripted([{ status: 503 }, { status: 503 }, { status: 503 }, { status: 503 }, { status: 503 }, ok({ data: 1 })], async (s) => {
      const { t, clock, acct } = setup({ retry: { maxAttempts: 6, baseDelayMs: 300, maxDelayMs: 1000, maxTotalDelayMs: 60_000 } });
      await client(t, s.url).get('x', '/v1/x', {}, acct);
      const caps = [300, 600, 1000, 1000, 1000];
      clock.sleeps.forEach((ms, i) => {
        expect(ms).toBeGreaterThanOrEqual(30);
        expect(ms).toBeLessThanOrEqual(caps[i]!);
      });
      await t.close();
    });
  });

  it('honours Retry-After as an HTTP date', async () => {
    const at = new Date(START + 7000).toUTCString();
    await scripted([{ status: 503, headers: { 'retry-after': at } }, ok({ data: 1 })], async (s) => {
      const { t, clock, acct } = setup({ random: () => 0 });
      await client(t, s.url).get('x', '/v1/x', {}, acct);
      expect(clock.sleeps).toEqual([7000]);
      await t.close();
    });
  });

  it('gives up after maxAttempts, and when the waits would pass maxTotalDelayMs', async () => {
    await scripted([{ status: 503, body: envelope('503', 'Service temporarily unavailable') }], async (s) => {
      const { t, clock, acct } = setup({ retry: { maxAttempts: 4 } });
      const e = await caught(client(t, s.url).get('explorer #2', '/v1/x', { limit: 1000 }, acct));
      expect(e.message).toMatch(
        /^explorer #2: gave up after 4 attempts; last: HTTP 503 url=http:\/\/127\.0\.0\.1:\d+\/v1\/x\?limit=1000 attempt=4 http=503 status="503" message="Service temporarily unavailable"$/,
      );
      expect(s.seen).toHaveLength(4);
      expect(clock.sleeps).toHaveLength(3);
      expect(acct).toMatchObject({ requests: 4, retries: 3 });
      await t.close();
    });
    await scripted([{ status: 500 }], async (s) => {
      const { t, clock, acct } = setup({ random: () => 0.999999, retry: { maxAttempts: 20, baseDelayMs: 100, maxTotalDelayMs: 500 } });
      const e = await caught(client(t, s.url).get('x', '/v1/x', {}, acct));
      expect(clock.sleeps.map(Math.round)).toEqual([100, 200]);
      expect(e.details.attempt).toBe(3);
      expect(e.message).toMatch(/would exceed the 500 ms retry budget/);
      await t.close();
    });
  });

  it('sorts HTTP-200 envelopes: throttle and 5xx are transient, other failure statuses terminal', async () => {
    await scripted(
      [{ status: 200, body: envelope('429', 'Too many requests') }, { status: 200, body: envelope('503', 'busy') }, ok({ data: 1 })],
      async (s) => {
        const { t, acct } = setup();
        await client(t, s.url).get('x', '/v1/x', {}, acct);
        expect(acct.failures).toEqual({ throttle: 1, envelope: 1 });
        expect(acct.throttles).toBe(1);
        await t.close();
      },
    );
    await scripted([{ status: 200, body: envelope('400', 'Invalid address format') }], async (s) => {
      const { t, acct } = setup();
      const e = await caught(client(t, s.url).get('x', '/v1/x', {}, acct));
      expect(e.details).toMatchObject({
        kind: 'terminal',
        reason: 'envelope',
        httpStatus: 200,
        envelopeStatus: '400',
        apiMessage: 'Invalid address format',
        attempt: 1,
      });
      expect(s.seen).toHaveLength(1);
      await t.close();
    });
  });

  it('never reads a success envelope without data as an empty page', async () => {
    const endpoint = transactions.endpoints[0]!;
    for (const results of [{ count: '5' }, { count: '0', data: null }, null, { data: [] }]) {
      await scripted([ok(results)], async (s) => {
        const { t, acct } = setup();
        const fetch = explorerPageFetcher(client(t, s.url), endpoint, { address: '0x' + 'a'.repeat(40) });
        const e = await fetch({ offset: 0, limit: 1000 }, acct).then(
          () => undefined,
          (err: unknown) => err,
        );
        expect(e).toBeInstanceOf(ShapeError);
        await t.close();
      });
    }
    // An envelope without any status is not a success, however good its results look.
    await scripted([{ status: 200, body: JSON.stringify({ message: 'OK', results: { count: '1', data: [{}] } }) }], async (s) => {
      const { t, acct } = setup();
      const e = await caught(client(t, s.url).get('x', '/v1/x', {}, acct));
      expect(e.details).toMatchObject({ kind: 'terminal', reason: 'envelope', httpStatus: 200 });
      await t.close();
    });
    await scripted([{ status: 200, body: JSON.stringify({ status: '200', message: 'OK' }) }], async (s) => {
      const { t, acct } = setup();
      const e = await caught(client(t, s.url).get('x', '/v1/x', {}, acct));
      expect(e.details).toMatchObject({ kind: 'terminal', reason: 'envelope', apiMessage: 'success envelope without results' });
      await t.close();
    });
  });

  it('never puts a credential in an error: the key rides in a header, and URLs are redacted', async () => {
    await scripted([{ status: 404, body: envelope('404', 'Not found') }], async (s) => {
      const { t, acct } = setup();
      const key = 'secret-key-abcdef';
      const c = new ExplorerClient(t, { baseUrl: `http://user:pw@127.0.0.1:${new URL(s.url).port}/api?apikey=${key}`, apiKey: key });
      const e = await caught(c.get('x', '/v1/x', { limit: 5 }, acct));
      expect(s.seen[0]!.headers['api-key']).toBe(key);
      expect(JSON.stringify({ m: e.message, d: { ...e.details, cause: undefined } })).not.toContain(key);
      expect(e.message).not.toContain('pw');
      expect(e.details.url).toContain('apikey=***');
      await t.close();
    });
    expect(redactUrl('https://h/x?token=abc&limit=3')).toBe('https://h/x?token=***&limit=3');
    // User info goes whether or not the query has a credential; a query without one is kept as it is.
    expect(redactUrl('https://user:pw@h/x?limit=3&address=0xAb')).toBe('https://***@h/x?limit=3&address=0xAb');
    expect(redactUrl('https://h/x?Auth_Token=abc')).toBe('https://h/x?Auth_Token=***');
  });

  it('a refused connection is transient: retried, then reported with the network code', async () => {
    const s = await new ScriptedServer([ok({ data: 1 })]).start();
    const url = s.url;
    await s.close(); // nothing listens on that port any more
    const { t, clock, acct } = setup({ retry: { maxAttempts: 3 } });
    const e = await caught(client(t, url).get('x', '/v1/x', {}, acct));
    expect(e.details).toMatchObject({ kind: 'transient', reason: 'network', attempt: 3 });
    expect(e.message).toMatch(/ECONNREFUSED/);
    expect(clock.sleeps).toHaveLength(2);
    await t.close();
  });

  it('keeps at most `concurrency` requests in flight', async () => {
    await scripted(
      [ok({ data: 1 })],
      async (s) => {
        const { t, acct } = setup({ concurrency: 3 });
        await Promise.all(Array.from({ length: 20 }, () => client(t, s.url).get('x', '/v1/x', {}, acct)));
        expect(s.maxInFlight).toBe(3);
        await t.close();
      },
      20,
    );
  });
});

describe("the block endpoint's answers that leave nothing to use", () => {
  it('a block record without a time: the window fails with the shape code, naming the block', async () => {
    await scripted([ok({ data: { block_number: 7 } })], async (s) => {
      const { t, acct } = setup();
      const e = await blockTimes(client(t, s.url), acct, { from: 7, to: 7 }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(e).toMatchObject({ code: 'CHAINLAKE_SHAPE', message: expect.stringContaining('block 7: the block endpoint gave no time (undefined)') });
      expect(s.seen.map((r) => r.url)).toEqual(['/v1/blocks/7']);
    });
  });

  it('a service that serves no block: its head is not guessed, a ChainlakeError with the API error code and the settings that fix it', async () => {
    await scripted([{ status: 404, body: envelope('404', 'Not found') }], async (s) => {
      const { t, acct } = setup();
      const e = await findHead(client(t, s.url), acct).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(e).toMatchObject({ code: 'CHAINLAKE_API_ERROR', message: 'block (head search): not even block 0 is served; the head cannot be found' });
      expect((e as { hint?: string }).hint).toMatch(/paths\.block.*range\.head, --head/);
      // blocks/latest once, then block 0 twice (the search's first probe and its last).
      expect(s.seen.map((r) => r.url)).toEqual(['/v1/blocks/latest', '/v1/blocks/0', '/v1/blocks/0']);
    });
  });
});

describe('failure classes, headers and accounting (units)', () => {
  it('summarises latency with percentiles', () => {
    const acct = new Accounting();
    for (let i = 1; i <= 100; i++) acct.recordResponse(i, 10);
    const other = new Accounting();
    other.recordResponse(1000, 5);
    acct.add(other);
    const s = acct.summary();
    expect(s).toMatchObject({ responses: 101, bytes: 1005 });
    expect(s.latencyMs.max).toBe(1000);
    expect(s.latencyMs.p50).toBeGreaterThanOrEqual(50);
    expect(s.latencyMs.p50).toBeLessThanOrEqual(50 * 1.2);
    expect(s.latencyMs.p99).toBeGreaterThanOrEqual(99);
    expect(s.latencyMs.p99).toBeLessThanOrEqual(100 * 1.2);
  });

  it('classifies HTTP statuses', () => {
    expect([429, 408, 500, 502, 503, 504, 520].map((s) => classifyStatus(s).kind)).toEqual(Array(7).fill('transient'));
    expect([400, 401, 403, 404, 405, 413, 501, 505, 301].map((s) => classifyStatus(s).kind)).toEqual(Array(9).fill('terminal'));
  });

  it('parses Retry-After', () => {
    expect(parseRetryAfter('3', 0)).toBe(3000);
    expect(parseRetryAfter(' 1.5 ', 0)).toBe(1500);
    expect(parseRetryAfter('0', 0)).toBe(0);
    expect(parseRetryAfter('-1', 0)).toBeUndefined();
    expect(parseRetryAfter('soon', 0)).toBeUndefined();
    expect(parseRetryAfter(undefined, 0)).toBeUndefined();
    expect(parseRetryAfter(new Date(START + 10_000).toUTCString(), START)).toBe(10_000);
    expect(parseRetryAfter(new Date(START - 10_000).toUTCString(), START)).toBe(0);
  });

  it('the explorer envelope check', () => {
    expect(checkExplorerEnvelope({ status: '200', message: 'OK', results: { data: [] } })).toEqual({ data: [] });
    expect(() => checkExplorerEnvelope({ status: '429', message: 'Too many requests', results: null })).toThrow();
  });
});
