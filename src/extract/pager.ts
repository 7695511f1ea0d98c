import type { Accounting } from './accounting.js';
import type { PageBudget } from './budget.js';
import { BlockSeek } from './block-seek.js';
import { PageHold } from './page-hold.js';
import { ApiError, WindowError } from './errors.js';
import { bisect } from './paging/bisect.js';
import { describeRange, PageCursor } from './paging/cursor.js';
import { blockTooLarge, PastCap, type RangeCounter } from './paging/past-cap.js';
import { PageQueue, type Slot, type SlotChecks } from './paging/queue.js';
import { CapLearned, CountDrift } from './paging/refetch.js';
import { RangeRows, type Tally } from './paging/rows.js';
import { entryCount, type BlockRange, type FetchedPage, type PageFetcher } from './page.js';
import { bugError } from '../errors.js';

export { entryCount, scannedList, type BlockRange, type FetchedPage, type PageFetcher, type PageRequest, type RawPage } from './page.js';

/** The result-window cap as learned from the server; share one between the windows of a run. */
export class LearnedCap {
  value: number | undefined;
}

export interface PagerOptions {
  pageSize: number;
  /** The API's cap on offset + limit (configured); a smaller one stated by the server's error wins. */
  resultWindow: number;
  /** Pages of one window in flight or fetched ahead of the consumer (latency hiding); bounded buffering. */
  prefetch: number;
  /** How often a window is refetched when its count moves under us, before giving up. */
  maxDriftRetries: number;
  /** Run-wide bound on pages fetched ahead and not yet consumed. */
  budget?: PageBudget;
  /** Run-wide memory of a cap learned from the server's error. */
  learnedCap?: LearnedCap;
  /** The entry field with the block number, used to continue past the cap (default `block_number`). */
  blockField?: string;
  /**
   * Re-count a window that was paged in several block ranges once at the end (default true): the only
   * check that catches rows moving in a range already left. Costs one request per such window.
   */
  closingCount?: boolean;
  /**
   * Stop a window once it holds this many rows (the run's count-sized windows), at the end of a block range
   * paged up to the result-window cap: the window keeps the rows of the blocks it holds whole, drops the rows
   * of its edge block (the last rows of its last page), and reports the range left (`WindowProgress.rest`),
   * which the caller pages as the next window. No request is spent on the cut: the next window's first page
   * is the page that would have come next anyway, give or take the edge block's rows. Needs entries with
   * block numbers and an edge block whose rows lie on the last page; otherwise paging continues past the cap.
   */
  cutAtRows?: number;
}

/** What paging one window took. */
export class WindowProgress {
  /** The API's `count` for the window (the sum over its parts when it was split). */
  rowsExpected = 0;
  /** Rows handed out; equals rowsExpected once the window completed. */
  rowsGot = 0;
  /** Pages fetched (handed out or not). */
  pages = 0;
  /** Times paging reached the result-window cap (or learned a smaller one). */
  capHits = 0;
  /** Times a block range was narrowed to get under the cap. */
  splits = 0;
  /** Times the window was refetched because its count moved. */
  driftRefetches = 0;
  /** Block ranges paged, each under the cap. */
  parts = 0;
  /** Extra count-only requests (continuation checks, block probes). */
  checks = 0;
  /** Current generation (see FetchedPage.generation). */
  generation = 0;
  /** With `cutAtCap`, when the window stopped at the cap: the block range its rows cover (all of its rows). */
  covered: BlockRange | undefined;
  /** With `cutAtCap`, when the window stopped at the cap: the block range left to page. */
  rest: BlockRange | undefined;
}

const CAP_MESSAGE = /(result window|offset\b.*\blimit|too deep|max(imum)? offset)/i;

/**
 * A result-window cap stated by the server's error, if it states one: the number after "equal to", "at most",
 * "maximum" and the like (`... offset + limit must be less than or equal to 10000`), else the last number.
 */
export function learnedCapOf(error: unknown): number | undefined {
  if (!(error instanceof ApiError)) return undefined;
  const msg = error.details.apiMessage ?? '';
  if (error.kind !== 'terminal' || !CAP_MESSAGE.test(msg)) return undefined;
  const stated = /(?:equal to|<=|≤|at most|up to|maximum(?: of| is)?|max(?:imum)?\s*(?:offset|window)?(?: of| is)?|cap(?:ped)?(?: at)?)\s*:?\s*(\d+)/i.exec(
    msg,
  );
  const numbers = msg.match(/\d+/g) ?? [];
  const n = Number(stated?.[1] ?? numbers.at(-1));
  return Number.isSafeInteger(n) && n >= 1 ? n : undefined;
}

/**
 * Pages one window completely and yields its pages in order, with up to `prefetch` requests ahead.
 *
 * A window whose `count` fits under the result-window cap is plain offset paging. One that does not is
 * continued past the cap by block range, with no request wasted: the listing is ordered by block, so after
 * paging up to the cap we narrow the range to end at the last block seen and carry on at the offset of the
 * rows of that block we already have (each step checks that the new range's count is exactly what is left).
 * A block that alone holds more rows than the cap is an explicit WindowError naming it. When entries carry no
 * readable block number, the range is bisected instead (the probe page is then refetched inside the parts).
 *
 * Completeness: every page must carry the count its range had at the start, every page must hold exactly the
 * rows its offset promises, and a window that needed several ranges is re-counted once at the end. Any
 * difference is count drift: the whole window is fetched again (a new `generation`), up to `maxDriftRetries`.
 */
export async function* pageWindow(
  fetch: PageFetcher,
  range: BlockRange | undefined,
  opts: PagerOptions,
  acct: Accounting,
  progress: WindowProgress,
): AsyncGenerator<FetchedPage> {
  if (!(Number.isInteger(opts.pageSize) && opts.pageSize >= 1)) throw new RangeError(`pageSize must be a positive integer, got ${opts.pageSize}`);
  if (!(Number.isInteger(opts.resultWindow) && opts.resultWindow >= 1))
    throw new RangeError(`resultWindow must be a positive integer, got ${opts.resultWindow}`);
  if (!(Number.isInteger(opts.prefetch) && opts.prefetch >= 1)) throw new RangeError(`prefetch must be a positive integer, got ${opts.prefetch}`);
  if (range && !(Number.isSafeInteger(range.from) && Number.isSafeInteger(range.to) && range.from <= range.to && range.from >= 0)) {
    throw new RangeError(`invalid block range ${range.from}-${range.to}`);
  }
  let drifts = 0;
  for (let generation = 0; ; generation++) {
    progress.generation = generation;
    progress.covered = progress.rest = undefined;
    const tally = { expected: 0, got: 0 };
    try {
      for await (const page of pageRange(fetch, range, opts, acct, progress, tally)) {
        page.generation = generation;
        yield page;
      }
      return;
    } catch (e) {
      if (!(e instanceof CapLearned || e instanceof CountDrift)) throw e;
      // This pass does not count: the next one fetches the window again from the start.
      progress.rowsExpected -= tally.expected;
      progress.rowsGot -= tally.got;
      if (e instanceof CapLearned) continue;
      progress.driftRefetches++;
      if (++drifts > opts.maxDriftRetries) {
        throw new WindowError(`the row count kept changing while paging ${range ? `blocks ${range.from}-${range.to}` : 'the window'} (${e.message})`);
      }
    }
  }
}

function effectiveCap(opts: PagerOptions): number {
  return Math.min(opts.resultWindow, opts.learnedCap?.value ?? Infinity);
}

async function* pageRange(
  fetch: PageFetcher,
  range: BlockRange | undefined,
  opts: PagerOptions,
  acct: Accounting,
  progress: WindowProgress,
  tally: Tally,
  hint?: FetchedPage,
): AsyncGenerator<FetchedPage> {
  const paging = new RangePaging(fetch, range, opts, acct, progress, tally, hint);
  try {
    yield* paging.run();
  } finally {
    await paging.abandon();
  }
}

/** What a window's first page decided: bisect it (no block numbers to seek by past the cap), or page it. */
type FirstPage = { kind: 'bisect'; first: FetchedPage } | { kind: 'paged'; first: FetchedPage; second: FetchedPage | undefined; firstLimit: number };

/**
 * The steps of one block range (see pageWindow for what they guarantee), over units that each keep their own
 * state: where paging stands (`cursor`), the rows promised and got (`rows`), the pages in flight (`queue`,
 * within the page budget `hold`), and paging past the cap by block number (`pastCap`); a range that cannot
 * seek is bisected (`bisect`), each part a range of its own.
 */
class RangePaging implements SlotChecks, RangeCounter {
  private readonly cap: number;
  private readonly limit: number;
  /** Budget units held: one per launched page not yet handed out. */
  private readonly hold: PageHold;
  /** The block numbers of pages (the range filter check), and the listing's order and edge block in seek mode. */
  private readonly seek: BlockSeek;
  private readonly cursor: PageCursor;
  private readonly rows: RangeRows;
  private readonly pastCap: PastCap;
  private readonly queue: PageQueue;

  constructor(
    private readonly fetch: PageFetcher,
    private readonly range: BlockRange | undefined,
    private readonly opts: PagerOptions,
    private readonly acct: Accounting,
    private readonly progress: WindowProgress,
    private readonly tally: Tally,
    /**
     * Bisection only: the parent range's first page, newest first. This range is the parent's newest part
     * (same end block), so that page is also this range's first page when this range holds a page or more.
     */
    private readonly hint?: FetchedPage,
  ) {
    this.cap = effectiveCap(opts);
    this.limit = Math.min(opts.pageSize, this.cap);
    this.hold = new PageHold(opts.budget);
    this.seek = new BlockSeek(opts.blockField ?? 'block_number');
    this.cursor = new PageCursor(this.limit, this.cap, progress);
    this.rows = new RangeRows(tally, progress);
    this.pastCap = new PastCap(this.seek, range, this.cap, opts.cutAtRows, this.cursor, this.rows, progress);
    this.queue = new PageQueue(fetch, acct, progress, opts.prefetch, this.hold, this.cursor, this);
  }

  /**
   * A window's steps: its first page decides how it is paged (whole, by offset, by seeking past the cap, or
   * bisected); then its pages in order, prefetched; then the counts that settle it.
   */
  async *run(): AsyncGenerator<FetchedPage> {
    const start = await this.firstPage();
    if (start.kind === 'bisect') {
      yield* bisect(start.first, this.range!, this.cap, this.limit, this.rows, this.progress, (part, hint) =>
        pageRange(this.fetch, part, this.opts, this.acct, this.progress, this.tally, hint),
      );
      return;
    }
    this.queueFirstPages(start);
    // Step 3: the pages in order, each handed out once validated (the hot path: no allocation of its own per page).
    const queue = this.queue;
    for (;;) {
      await queue.topUp();
      const head = queue.head();
      if (head === undefined) {
        if (this.pastCap.probeBlock !== undefined) {
          await this.pastCap.probe(this);
          continue;
        }
        if (this.cursor.finished) break;
        throw bugError('pager: nothing in flight and nothing left to plan');
      }
      while (!head.validated && head.error === undefined) await queue.settling();
      if (head.error !== undefined) throw this.failure(head.error);
      queue.shift();
      const page = this.pastCap.trim(head.page!, head.last, head.seg);
      this.rows.handedOut(entryCount(page));
      try {
        yield page;
      } finally {
        this.hold.releaseOne();
      }
    }
    await this.settle();
  }

  /** Step 1: the first page (or the bisecting parent's), the window's count, and how it will be paged. */
  private async firstPage(): Promise<FirstPage> {
    let second: FetchedPage | undefined;
    let first: FetchedPage;
    if (this.hint) ({ first, second } = await this.fromHint(this.hint));
    else first = await this.fetchFirst();
    this.rows.counted(first.count);
    // A first page holding every row is the whole window, whatever the limit: endpoints that do not page
    // answer that way, and there is nothing past the cap to reach.
    const whole = entryCount(first) === first.count;
    const firstLimit = whole ? Math.max(this.limit, first.count) : this.limit;
    if (whole || first.count <= this.cap) {
      this.cursor.start({ range: this.range, offset0: 0, expected: first.count, end: first.count });
    } else {
      this.progress.capHits++;
      if (!this.range) {
        throw new WindowError(`${first.count} rows exceed the API's result window of ${this.cap} and this endpoint has no block filter to narrow by`);
      }
      if (this.range.from === this.range.to) throw blockTooLarge(this.range.from, first.count, this.cap);
      if (!this.pastCap.begin(first)) {
        // No block numbers to continue by: bisect, and let each part page itself.
        this.hold.releaseOne();
        return { kind: 'bisect', first };
      }
      this.cursor.start({ range: this.range, offset0: 0, expected: first.count, end: this.cap });
    }
    return { kind: 'paged', first, second, firstLimit };
  }

  /** Step 2: the first page (and the second, when the hint's probe fetched it) as the first slots of the first segment. */
  private queueFirstPages({ first, second, firstLimit }: Extract<FirstPage, { kind: 'paged' }>): void {
    const slot = this.queue.pushFetched({ offset: 0, limit: firstLimit, range: this.range }, first);
    // The page fetched to test the hint is this range's second page.
    if (second && !slot.last) this.queue.pushFetched({ offset: this.limit, limit: this.limit, range: this.range }, second);
    else if (second) this.hold.releaseOne();
    this.queue.validateReady();
  }

  /** Step 4 (after step 3, the pages): every row arrived, and a window paged in parts still counts what it did at the start. */
  private async settle(): Promise<void> {
    this.rows.settle();
    if (this.cursor.segments > 1 && this.opts.closingCount !== false) {
      // Rows could have moved in a part we already left; one count of the whole range (of what the window
      // kept, when it stopped early) settles it.
      const check = await this.count(this.progress.covered ?? this.range!);
      if (check !== this.rows.total) throw new CountDrift(`the range now counts ${check} rows, ${this.rows.total} when paging began`);
    }
  }

  private async fetchFirst(): Promise<FetchedPage> {
    await this.hold.take();
    try {
      const page = await this.fetch({ offset: 0, limit: this.limit, range: this.range }, this.acct);
      this.progress.pages++;
      return page;
    } catch (e) {
      this.hold.releaseOne();
      throw this.failure(e);
    }
  }

  /**
   * Turns the parent's first page into this range's first page: the page at offset `limit` of this range
   * tells its count; its first `min(count, limit)` rows are the parent's first rows. Holds budget for both.
   */
  private async fromHint(hint: FetchedPage): Promise<{ first: FetchedPage; second?: FetchedPage }> {
    await this.hold.take();
    await this.hold.take();
    let second: FetchedPage;
    try {
      second = await this.fetch({ offset: this.limit, limit: this.limit, range: this.range }, this.acct);
      this.progress.pages++;
    } catch (e) {
      this.hold.releaseOne();
      this.hold.releaseOne();
      throw this.failure(e);
    }
    const count = second.count;
    // The entries are cut from the hint's: the page no longer is its body as received.
    const entries = hint.entries.slice(0, Math.min(count, this.limit));
    const first: FetchedPage = {
      ...hint,
      entries,
      size: entries.length,
      raw: undefined,
      cutFrom: hint.raw ?? hint.cutFrom,
      count,
      offset: 0,
      range: this.range,
    };
    if (count > this.limit && count <= this.cap) return { first, second };
    // Nothing past the first page, or more than the cap (this range is split in turn): the probe is spent.
    this.hold.releaseOne();
    return { first };
  }

  /** Cap errors become a refetch under the learned cap; other errors pass. */
  private failure(e: unknown): unknown {
    const learned = learnedCapOf(e);
    if (learned !== undefined && learned < this.cap) {
      if (this.opts.learnedCap) this.opts.learnedCap.value = Math.min(this.opts.learnedCap.value ?? Infinity, learned);
      else this.opts.resultWindow = learned;
      this.progress.capHits++;
      return new CapLearned(`the server caps offset + limit at ${learned}`);
    }
    return e;
  }

  /** Checks a page as it arrives, before any page after it is handed out. */
  validate(slot: Slot): void {
    const { page, req, seg } = slot as Required<Pick<Slot, 'page'>> & Slot;
    if (page.count !== seg.expected) {
      throw new CountDrift(`${describeRange(seg.range)} counted ${seg.expected} rows, now ${page.count} (offset ${req.offset})`);
    }
    const expectedRows = Math.max(0, Math.min(req.limit, seg.expected - req.offset));
    const rows = entryCount(page);
    if (rows !== expectedRows) {
      throw new CountDrift(`the page at offset ${req.offset} of ${describeRange(seg.range)} holds ${rows} rows, expected ${expectedRows} of ${seg.expected}`);
    }
    if (req.range) this.inRange(page, req.range, req.offset);
    this.pastCap.follow(page, seg, req.offset);
    this.rows.arrived(rows);
  }

  /**
   * Every row must lie in the block range asked: an API that ignores its range filter (Blockscout #9321) would
   * otherwise have its rows stored under windows they do not belong to, and windows counted by it would look
   * complete. Entries without a readable block number are not judged.
   */
  private inRange(page: FetchedPage, range: BlockRange, offset: number): void {
    for (const b of this.seek.blocksOf(page)) {
      if (b !== undefined && (b < range.from || b > range.to)) {
        throw new WindowError(
          `the API listed a row of block ${b} when asked for blocks ${range.from}-${range.to} (page at offset ${offset}): it ignores the block range filter, so the window's rows are refused, not stored`,
        );
      }
    }
  }

  /** The segment's pages are all in: finish, or (rows beyond the cap) page past it. */
  segmentEnded(slot: Slot): void {
    if (slot.seg.expected <= slot.seg.end) this.cursor.finish();
    else this.pastCap.endSegment(slot.seg, slot.page!);
  }

  async count(range: BlockRange): Promise<number> {
    this.progress.checks++;
    try {
      return (await this.fetch({ offset: 0, limit: 1, range }, this.acct)).count;
    } catch (e) {
      throw this.failure(e);
    }
  }

  /** On error or early stop: no request left unobserved, no budget held. */
  async abandon(): Promise<void> {
    const pending = this.queue.abandon();
    this.cursor.pause();
    await pending;
    this.hold.releaseAll();
  }
}
