import { describe, expect, it } from 'vitest';
import { Accounting } from '../../src/extract/accounting.js';
import { PageBudget } from '../../src/extract/budget.js';
import { ApiError, WindowError } from '../../src/extract/errors.js';
import { LearnedCap, learnedCapOf, pageWindow, WindowProgress, type PageFetcher } from '../../src/extract/pager.js';
import { collect, pagerOptions } from './helpers.js';
import { Listing } from './listing.js';

const ids = (rows: Record<string, unknown>[]): string[] => rows.map((r) => String(r.id));

/** Blocks 0..n-1 with a repeatable, uneven number of rows each (0 to 6). */
const uneven = (n: number): number[] => Array.from({ length: n }, (_, b) => (b * 7919) % 7);

describe('pager (against an in-memory listing with the API paging rules)', () => {
  it('pages a window under the cap with exactly one request per page', async () => {
    const api = new Listing(uneven(1000), 10_000);
    const total = api.rows(0, 999).length;
    const r = await collect(api.fetch, { from: 0, to: 999 }, pagerOptions({ pageSize: 100, prefetch: 3 }));
    expect(ids(r.rows)).toEqual(ids(api.rows(0, 999)));
    expect(api.requests.length).toBe(Math.ceil(total / 100));
    expect(r.progress).toMatchObject({ rowsExpected: total, rowsGot: total, splits: 0, checks: 0 });
  });

  it.each(['desc', 'asc'] as const)('continues past the cap by block range (%s order), in order, without a wasted request', async (order) => {
    const api = new Listing(uneven(5000), 1000, order);
    const total = api.rows(0, 4999).length;
    const r = await collect(api.fetch, { from: 0, to: 4999 }, pagerOptions({ pageSize: 100, resultWindow: 1000, prefetch: 4 }));
    expect(ids(r.rows)).toEqual(ids(api.rows(0, 4999)));
    expect(r.progress.rowsGot).toBe(total);
    expect(r.progress.splits).toBeGreaterThan(10);
    // Pages: the minimum plus a short last page per continued range, plus one closing count.
    const min = Math.ceil(total / 100);
    expect(api.requests.length).toBeLessThanOrEqual(min + r.progress.parts + 1);
    expect(api.requests.every((q) => q.offset + q.limit <= 1000)).toBe(true);
  });

  it('moves past a block holding exactly the cap, and names a block holding more', async () => {
    const exact = uneven(300);
    exact[150] = 500;
    const api = new Listing(exact, 500);
    const r = await collect(api.fetch, { from: 0, to: 299 }, pagerOptions({ pageSize: 100, resultWindow: 500 }));
    expect(ids(r.rows)).toEqual(ids(api.rows(0, 299)));

    const over = uneven(300);
    over[150] = 501;
    const api2 = new Listing(over, 500);
    const err = await collect(api2.fetch, { from: 0, to: 299 }, pagerOptions({ pageSize: 100, resultWindow: 500 })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WindowError);
    expect((err as WindowError).block).toBe(150);
    expect((err as Error).message).toMatch(/block 150 alone holds 501 rows, more than the API's result window of 500/);
  });

  it('a one-block window over the cap fails at once, naming the block', async () => {
    const perBlock = [3, 700, 2];
    const api = new Listing(perBlock, 500);
    const err = await collect(api.fetch, { from: 1, to: 1 }, pagerOptions({ pageSize: 100, resultWindow: 500 })).catch((e: unknown) => e);
    expect((err as WindowError).block).toBe(1);
    expect(api.requests.length).toBe(1);
  });

  it('takes a first page that holds every row as the whole window (endpoints that do not page)', async () => {
    const all = Array.from({ length: 1500 }, (_, i) => ({ id: String(i) }));
    let calls = 0;
    const single: PageFetcher = async (req) => {
      calls++;
      return { entries: all, results: {}, count: all.length, offset: req.offset, range: req.range };
    };
    const r = await collect(single, undefined, pagerOptions({ pageSize: 1000, resultWindow: 1000 }));
    expect(r.rows).toHaveLength(1500);
    expect(calls).toBe(1);
  });

  it.each([
    ['newest first: the probe page is reused', 'desc', true],
    ['oldest first: no reuse, still complete', 'asc', false],
  ] as const)('bisects entries with timestamps but no block number (%s)', async (_, order, reused) => {
    // Uneven density: a dense newest stretch overflows its part, a sparse one holds under a page.
    const perBlock = uneven(3000).map((n, b) => (b >= 2900 ? n * 12 : b < 1500 ? 0 : n));
    const api = new Listing(perBlock, 1000, order, false, true);
    const total = api.rows(0, 2999).length;
    const r = await collect(api.fetch, { from: 0, to: 2999 }, pagerOptions({ pageSize: 100, resultWindow: 1000 }));
    expect(r.count).toBe(total);
    expect(r.keys.size).toBe(total);
    expect(new Set(ids(r.rows))).toEqual(new Set(ids(api.rows(0, 2999))));
    const repeatedFirstPage = api.requests.filter((q) => q.offset === 0 && q.range?.to === 2999).length;
    // Newest first, the first page of the range is fetched once however deep the newest part is split.
    if (reused) expect(repeatedFirstPage).toBe(1);
    else expect(repeatedFirstPage).toBeGreaterThan(1);
  });

  it('bisection reuses the probe when the newest part holds less than a page', async () => {
    const perBlock = uneven(4000).map((n, b) => (b >= 3990 ? 1 : n));
    const api = new Listing(perBlock, 1000, 'desc', false, true);
    const r = await collect(api.fetch, { from: 0, to: 3999 }, pagerOptions({ pageSize: 100, resultWindow: 1000 }));
    expect(ids(r.rows)).toEqual(ids(api.rows(0, 3999)));
  });

  it('bisects when entries carry no block number', async () => {
    const api = new Listing(uneven(2000), 1000, 'desc', false);
    const r = await collect(api.fetch, { from: 0, to: 1999 }, pagerOptions({ pageSize: 100, resultWindow: 1000 }));
    expect(new Set(ids(r.rows)).size).toBe(api.rows(0, 1999).length);
    expect(r.rows.length).toBe(api.rows(0, 1999).length);
    expect(r.progress.splits).toBeGreaterThan(0);
  });

  it('learns a smaller cap from the server error, refetches the window once, and shares the cap', async () => {
    const api = new Listing(uneven(2000), 700);
    const learnedCap = new LearnedCap();
    const opts = pagerOptions({ pageSize: 100, resultWindow: 10_000, learnedCap });
    const r = await collect(api.fetch, { from: 0, to: 1999 }, opts);
    expect(ids(r.rows)).toEqual(ids(api.rows(0, 1999)));
    expect(learnedCap.value).toBe(700);
    expect(r.pages.at(-1)!.generation).toBe(1);

    // The next window of the run starts under the learned cap: no failed request.
    const api2 = new Listing(uneven(2000), 700);
    const r2 = await collect(api2.fetch, { from: 0, to: 1999 }, opts);
    expect(r2.rows.length).toBe(api2.rows(0, 1999).length);
    expect(r2.pages.every((p) => p.generation === 0)).toBe(true);
    expect(api2.requests.every((q) => q.offset + q.limit <= 700)).toBe(true);
  });

  it('holds no more pages than the run budget across windows, and frees it when a consumer stops early', async () => {
    const budget = new PageBudget(3);
    let maxHeld = 0;
    const watch =
      (fetch: PageFetcher): PageFetcher =>
      async (req, acct) => {
        maxHeld = Math.max(maxHeld, 3 - (budget as unknown as { available: number }).available);
        return fetch(req, acct);
      };
    const apis = [0, 1, 2].map(() => new Listing(uneven(3000), 10_000));
    const opts = pagerOptions({ pageSize: 50, prefetch: 8, budget });
    const results = await Promise.all(apis.map((a) => collect(watch(a.fetch), { from: 0, to: 2999 }, opts)));
    results.forEach((r, i) => expect(r.rows.length).toBe(apis[i]!.rows(0, 2999).length));
    expect(maxHeld).toBeLessThanOrEqual(3);

    const gen = pageWindow(apis[0]!.fetch, { from: 0, to: 2999 }, opts, new Accounting(), new WindowProgress());
    await gen.next();
    await gen.return(undefined);
    expect((budget as unknown as { available: number }).available).toBe(3);
  });

  it('refetches the window when the count moves, and gives up when it never settles', async () => {
    const perBlock = uneven(2000);
    const api = new Listing(perBlock, 10_000);
    let calls = 0;
    const once: PageFetcher = async (req, acct) => {
      if (++calls === 3) perBlock[10] = perBlock[10]! + 1; // a row appears in a block we have not reached yet
      return api.fetch(req, acct);
    };
    const r = await collect(once, { from: 0, to: 1999 }, pagerOptions({ pageSize: 100, prefetch: 1 }));
    expect(ids(r.rows)).toEqual(ids(api.rows(0, 1999)));
    expect(r.progress.driftRefetches).toBe(1);

    const always: PageFetcher = async (req, acct) => {
      perBlock[20] = perBlock[20]! + 1;
      return api.fetch(req, acct);
    };
    const err = await collect(always, { from: 0, to: 1999 }, pagerOptions({ pageSize: 100, prefetch: 1, maxDriftRetries: 2 })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WindowError);
    expect((err as Error).message).toMatch(/row count kept changing/);
  });

  it('notices rows that move in a range it already left, with one closing count', async () => {
    const perBlock = uneven(3000);
    const api = new Listing(perBlock, 1000);
    let moved = false;
    const fetch: PageFetcher = async (req, acct) => {
      // Once paging has continued below block 2500, a row appears above it (where no page will look again).
      if (!moved && req.range && req.range.to < 2500) {
        moved = true;
        perBlock[2900] = perBlock[2900]! + 1;
      }
      return api.fetch(req, acct);
    };
    const r = await collect(fetch, { from: 0, to: 2999 }, pagerOptions({ pageSize: 100, resultWindow: 1000 }));
    expect(r.progress.driftRefetches).toBe(1);
    expect(ids(r.rows)).toEqual(ids(api.rows(0, 2999)));
  });
});

describe('the cap stated in a server error', () => {
  const err = (apiMessage: string, kind: 'terminal' | 'transient' = 'terminal'): ApiError =>
    new ApiError('HTTP 400', { kind, reason: 'http-4xx', endpoint: 'x', url: 'http://h/x', attempt: 1, httpStatus: 400, apiMessage });
  it.each([
    ['Result window is too large, offset + limit must be less than or equal to 10000', 10_000],
    ['offset 9000 + limit 1000 is beyond the maximum of 5000', 5000],
    ['Result window too deep: at most 2500 rows', 2500],
    ['max offset is 9999', 9999],
  ])('%s', (message, cap) => expect(learnedCapOf(err(message))).toBe(cap));
  it('ignores other errors', () => {
    expect(learnedCapOf(err('Invalid address format'))).toBeUndefined();
    expect(learnedCapOf(err('Rate limit exceeded: retry after 1 s', 'transient'))).toBeUndefined();
  });
});
