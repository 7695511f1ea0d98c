import type { BlockSeek } from '../block-seek.js';
import { WindowError } from '../errors.js';
import { entryCount, type BlockRange, type FetchedPage } from '../page.js';
import { describeRange, type PageCursor, type Segment } from './cursor.js';
import { CountDrift } from './refetch.js';
import type { RangeRows } from './rows.js';

/** Counts a block range with a count-only request. */
export interface RangeCounter {
  count(range: BlockRange): Promise<number>;
}

/** What paging past the cap updates of the window's progress. */
export interface PastCapProgress {
  capHits: number;
  splits: number;
  covered: BlockRange | undefined;
  rest: BlockRange | undefined;
}

/**
 * Paging past the result-window cap by block number (seek mode): a listing ordered by block is continued, once a
 * segment reached the cap, from its edge block, skipping the rows of it already paged; an edge block that fills
 * the cap alone is probed by its own count; with `cutAtRows` the window stops at the edge block instead.
 */
export class PastCap {
  private seeking = false;
  /** A block whose rows fill the cap: its own count decides whether we can move past it. */
  probeBlock: number | undefined;
  /** With cutAtRows: the window stops at the end of segment `seg`, without the rows of `block` (its last `drop` rows). */
  private cut: { block: number; drop: number; seg: Segment } | undefined;

  constructor(
    /** The listing's order and its edge block. */
    private readonly seek: BlockSeek,
    private readonly range: BlockRange | undefined,
    private readonly cap: number,
    private readonly cutAtRows: number | undefined,
    private readonly cursor: PageCursor,
    private readonly rows: RangeRows,
    private readonly progress: PastCapProgress,
  ) {}

  /** Seek mode, if the first page shows the listing's block order; else the range must be bisected. */
  begin(first: FetchedPage): boolean {
    const order = this.seek.orderOf(first);
    if (order === undefined) return false;
    this.seek.order = order;
    this.seeking = true;
    return true;
  }

  /** Follows a validated page's blocks in seek mode (refusing a page out of order). */
  follow(page: FetchedPage, seg: Segment, offset: number): void {
    if (this.seeking) this.seek.follow(page, seg.range!, offset, describeRange(seg.range));
  }

  /** A segment that reached the cap with rows beyond it is paged: continue past it, probe its edge block, or cut. */
  endSegment(seg: Segment, last: FetchedPage): void {
    this.progress.capHits++;
    const b = this.seek.lastBlock;
    const k = this.seek.edgeRows;
    const r = seg.range!;
    const cutAt = this.cutAtRows;
    const rows = this.rows;
    if (cutAt !== undefined && rows.validated >= cutAt && k < rows.validated && k <= entryCount(last) && b >= r.from && b <= r.to) {
      // Stop here: this window keeps the rows of the blocks it holds whole; the rest is the next window's.
      this.cut = { block: b, drop: k, seg };
      rows.keep(rows.validated - k);
      const w = this.range!;
      this.progress.covered = this.seek.before(w, b);
      this.progress.rest = this.seek.after(w, b, true);
      this.cursor.finish();
      return;
    }
    if (k >= this.cap) {
      this.cursor.pause();
      this.probeBlock = b;
      return;
    }
    this.continueAt(b, k);
  }

  /** The page handed out: the last page of a cut window without its edge block's rows. */
  trim(page: FetchedPage, last: boolean, seg: Segment): FetchedPage {
    if (!(last && this.cut && seg === this.cut.seg)) return page;
    // The edge block's rows are the page's last ones: the next window has them all.
    const entries = page.entries.slice(0, entryCount(page) - this.cut.drop);
    return { ...page, entries, size: entries.length, raw: undefined, cutFrom: page.raw ?? page.cutFrom };
  }

  private continueAt(block: number, skip: number): void {
    this.startPart(this.seek.after(this.range!, block, true), skip, this.rows.left + skip);
  }

  /** A new segment over `range`, from offset `offset0`, that must count `expected` rows. */
  private startPart(range: BlockRange, offset0: number, expected: number): void {
    this.progress.splits++;
    this.cursor.start({ range, offset0, expected, end: Math.min(expected, this.cap) });
  }

  /** A block's rows filled the cap: move past it if that was all of them, else it cannot be paged. */
  async probe(counter: RangeCounter): Promise<void> {
    const block = this.probeBlock!;
    this.probeBlock = undefined;
    const n = await counter.count({ from: block, to: block });
    if (n > this.seek.edgeRows) throw blockTooLarge(block, n, this.cap);
    if (n < this.seek.edgeRows) throw new CountDrift(`block ${block} counts ${n} rows, ${this.seek.edgeRows} were paged`);
    const r = this.range!;
    const left = this.rows.left;
    const range = this.seek.after(r, block, false);
    if (left === 0 || range.from > range.to) {
      if (left !== 0) throw new CountDrift(`${left} rows missing after block ${block}`);
      this.cursor.finish();
      return;
    }
    this.startPart(range, 0, left);
  }
}

export function blockTooLarge(block: number, count: number, cap: number): WindowError {
  return new WindowError(
    `block ${block} alone holds ${count} rows, more than the API's result window of ${cap} (offset + limit): it cannot be paged completely`,
    block,
  );
}
