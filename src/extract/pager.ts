import type { Accounting } from './accounting.js';
import type { PageBudget } from './budget.js';
import { ApiError, WindowError } from './errors.js';

/** A closed block range `[from, to]`. */
export interface BlockRange {
  from: number;
  to: number;
}

export interface PageRequest {
  offset: number;
  limit: number;
  range?: BlockRange;
}

export interface FetchedPage {
  entries: unknown[];
  /** The envelope's results object, for fields that sit beside `data` (token_name, to_block...). */
  results: Record<string, unknown>;
  count: number;
  offset: number;
  range?: BlockRange;
}

export type PageFetcher = (req: PageRequest, acct: Accounting) => Promise<FetchedPage>;

export interface PagerOptions {
  pageSize: number;
  /** The API's cap on offset + limit; learned from the server's error when it says so. */
  resultWindow: number;
  /** Pages of one window requested ahead of the consumer (latency hiding); bounded buffering. */
  prefetch: number;
  /** How often a window is refetched when its count moves under us, before giving up. */
  maxDriftRetries: number;
  /** Run-wide bound on pages fetched ahead and not yet consumed. */
  budget?: PageBudget;
}

/** What paging one window took; parts are the block sub-ranges that fit under the result-window cap. */
export class WindowProgress {
  rowsExpected = 0;
  rowsGot = 0;
  pages = 0;
  capHits = 0;
  splits = 0;
  driftRefetches = 0;
  parts = 0;
}

const CAP_MESSAGE = /(result window|offset\s*\+\s*limit|too deep|max(imum)? offset)/i;

/** A result-window cap stated by the server (e.g. "... must be less than or equal to 10000"), if any. */
function learnedCap(error: ApiError): number | undefined {
  const msg = error.details.apiMessage ?? '';
  if (error.kind !== 'terminal' || !CAP_MESSAGE.test(msg)) return undefined;
  const numbers = (msg.match(/\d{3,}/g) ?? []).map(Number).filter((n) => n >= 100);
  return numbers.length ? Math.max(...numbers) : undefined;
}

class CountDrift extends Error {}

/**
 * Pages one window completely: offset paging with up to `prefetch` pages in flight, in order. A range whose
 * count exceeds the result-window cap is split into block sub-ranges sized to fit (recursively); a single
 * block over the cap is an explicit error. A count that changes while paging refetches the part.
 */
export async function* pageWindow(
  fetch: PageFetcher,
  range: BlockRange | undefined,
  opts: PagerOptions,
  acct: Accounting,
  progress: WindowProgress,
): AsyncGenerator<FetchedPage> {
  yield* pagePart(fetch, range, opts, acct, progress);
}

async function* pagePart(
  fetch: PageFetcher,
  range: BlockRange | undefined,
  opts: PagerOptions,
  acct: Accounting,
  progress: WindowProgress,
): AsyncGenerator<FetchedPage> {
  for (let drift = 0; ; drift++) {
    let first: FetchedPage;
    try {
      first = await fetch({ offset: 0, limit: Math.min(opts.pageSize, opts.resultWindow), range }, acct);
    } catch (e) {
      const cap = e instanceof ApiError ? learnedCap(e) : undefined;
      if (cap !== undefined && cap < opts.resultWindow) {
        opts.resultWindow = cap;
        progress.capHits++;
        continue;
      }
      throw e;
    }
    progress.pages++;
    const count = first.count;
    if (count > opts.resultWindow) {
      progress.capHits++;
      if (!range) {
        throw new WindowError(`${count} rows exceed the API's result window of ${opts.resultWindow} and this endpoint has no block filter to split by`);
      }
      if (range.from === range.to) {
        throw new WindowError(
          `block ${range.from} alone holds ${count} rows, more than the API's result window of ${opts.resultWindow}: it cannot be paged completely`,
        );
      }
      yield* splitRange(fetch, range, count, opts, acct, progress);
      return;
    }
    try {
      const got = yield* pageRest(fetch, range, first, opts, acct, progress);
      progress.parts++;
      progress.rowsExpected += count;
      progress.rowsGot += got;
      return;
    } catch (e) {
      if (!(e instanceof CountDrift)) throw e;
      progress.driftRefetches++;
      if (drift >= opts.maxDriftRetries) {
        throw new WindowError(`the row count kept changing while paging ${range ? `blocks ${range.from}-${range.to}` : 'the window'} (${e.message})`);
      }
    }
  }
}

/** Splits a range over the cap into parts expected to hold ~90 % of the cap each (bisection at worst). */
async function* splitRange(
  fetch: PageFetcher,
  range: BlockRange,
  count: number,
  opts: PagerOptions,
  acct: Accounting,
  progress: WindowProgress,
): AsyncGenerator<FetchedPage> {
  const span = range.to - range.from + 1;
  const parts = Math.min(span, Math.max(2, Math.ceil(count / (opts.resultWindow * 0.9))));
  progress.splits++;
  // Newest first, like the API's own order.
  for (let i = parts - 1; i >= 0; i--) {
    const from = range.from + Math.floor((span * i) / parts);
    const to = range.from + Math.floor((span * (i + 1)) / parts) - 1;
    if (to >= from) yield* pagePart(fetch, { from, to }, opts, acct, progress);
  }
}

async function* pageRest(
  fetch: PageFetcher,
  range: BlockRange | undefined,
  first: FetchedPage,
  opts: PagerOptions,
  acct: Accounting,
  progress: WindowProgress,
): AsyncGenerator<FetchedPage, number> {
  const count = first.count;
  const limit = Math.min(opts.pageSize, opts.resultWindow);
  const expectFirst = Math.min(limit, count);
  if (first.entries.length !== expectFirst) throw new CountDrift(`first page holds ${first.entries.length} rows, expected ${expectFirst} of ${count}`);
  let got = first.entries.length;
  yield first;

  const offsets: number[] = [];
  for (let offset = limit; offset < count; offset += limit) offsets.push(offset);
  const budget = opts.budget;
  const inFlight: Promise<FetchedPage>[] = [];
  let next = 0;
  /** Budget units this window holds: one per page launched and not yet handed to the consumer. */
  let held = 0;
  const launch = (): void => {
    const offset = offsets[next++]!;
    const p = fetch({ offset, limit: Math.min(limit, opts.resultWindow - offset), range }, acct);
    p.catch(() => undefined); // awaited in order below; avoid an unhandled rejection while it waits its turn
    inFlight.push(p);
  };
  // A window with nothing in flight waits for budget; one that has pages coming only takes spare budget.
  const topUp = async (): Promise<void> => {
    while (next < offsets.length && inFlight.length < opts.prefetch) {
      if (budget) {
        if (inFlight.length === 0) await budget.acquire();
        else if (!budget.tryAcquire()) return;
        held++;
      }
      launch();
    }
  };
  try {
    await topUp();
    while (inFlight.length > 0) {
      const page = await inFlight.shift()!;
      progress.pages++;
      if (page.count !== count) throw new CountDrift(`count moved from ${count} to ${page.count} at offset ${page.offset}`);
      const expected = Math.min(limit, count - page.offset);
      if (page.entries.length !== expected) throw new CountDrift(`page at offset ${page.offset} holds ${page.entries.length} rows, expected ${expected}`);
      got += page.entries.length;
      try {
        yield page;
      } finally {
        if (budget) {
          held--;
          budget.release();
        }
      }
      await topUp();
    }
    return got;
  } finally {
    // An abandoned window (error or consumer stop) must not leave requests unobserved or budget held.
    await Promise.allSettled(inFlight.splice(0));
    for (; held > 0; held--) budget?.release();
  }
}
