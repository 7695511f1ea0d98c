import { entryCount, scannedList, type BlockRange, type FetchedPage } from './page.js';
import { WindowError } from './errors.js';
import { OTHER, STRING, type ScannedList } from './scan.js';

/**
 * Paging past the result window by block number: a listing ordered by block (newest or oldest first) is
 * continued from the last block seen. This follows the order and the edge block (its number and how many of
 * its rows were paged), and refuses a page out of order, where continuing would skip or repeat rows.
 */
export class BlockSeek {
  order: 'desc' | 'asc' = 'desc';
  /** The last block seen, NaN before any. */
  lastBlock = NaN;
  /** Rows of `lastBlock` paged so far. */
  edgeRows = 0;

  constructor(private readonly blockField: string) {}

  /**
   * The block number of each entry of a page (undefined where unreadable). Read from the scanned list when the
   * block field is one it located, so that paging past the cap does not parse the entries.
   */
  blocksOf(page: FetchedPage): (number | undefined)[] {
    const list = scannedList(page);
    const f = list ? list.fields.indexOf(this.blockField) : -1;
    // The scan lists every other key the entries carry: when the block field is not among them, no entry has
    // one (event logs), and parsing the entries to learn so would cost the parse the scan spared.
    if (list && f < 0 && !list.unknown.some((k) => k.name === this.blockField)) return new Array<undefined>(list.count).fill(undefined);
    if (f < 0) return page.entries.map((e) => (e !== null && typeof e === 'object' ? blockNumber((e as Record<string, unknown>)[this.blockField]) : undefined));
    const blocks = new Array<number | undefined>(list!.count);
    for (let i = 0; i < blocks.length; i++) blocks[i] = scannedBlockNumber(list!, i, f);
    return blocks;
  }

  /** The listing's block order on a page, if its entries carry block numbers. */
  orderOf(page: FetchedPage): 'desc' | 'asc' | undefined {
    if (entryCount(page) === 0) return undefined;
    const blocks = this.blocksOf(page);
    if (blocks.some((b) => b === undefined)) return undefined;
    const bs = blocks as number[];
    if (bs.every((b, i) => i === 0 || b <= bs[i - 1]!)) return 'desc';
    if (bs.every((b, i) => i === 0 || b >= bs[i - 1]!)) return 'asc';
    return undefined;
  }

  /** Follows a validated page's blocks, in `range`, at `offset` (for messages); throws when out of order. */
  follow(page: FetchedPage, range: BlockRange, offset: number, where: string): void {
    for (const b of this.blocksOf(page)) {
      // Without its block the page cannot be followed: continuing from the last block would skip or repeat rows.
      if (b === undefined)
        throw new WindowError(`an entry at offset ${offset} of ${where} has no readable '${this.blockField}'; cannot page past the result window`);
      const inOrder = Number.isNaN(this.lastBlock) || (this.order === 'desc' ? b <= this.lastBlock : b >= this.lastBlock);
      if (!inOrder || b < range.from || b > range.to) {
        throw new WindowError(
          `the listing of ${where} is not ordered by block as assumed (block ${b} after block ${this.lastBlock}, offset ${offset}); cannot page past the result window`,
        );
      }
      if (b === this.lastBlock) this.edgeRows++;
      else {
        this.lastBlock = b;
        this.edgeRows = 1;
      }
    }
  }

  /** The part of `range` paged before `block` in the listing's order (without `block`). */
  before(range: BlockRange, block: number): BlockRange {
    return this.order === 'desc' ? { from: block + 1, to: range.to } : { from: range.from, to: block - 1 };
  }

  /** The part of `range` that continues past `block`, or from it (`inclusive`), in the listing's order. */
  after(range: BlockRange, block: number, inclusive: boolean): BlockRange {
    const step = inclusive ? 0 : 1;
    return this.order === 'desc' ? { from: range.from, to: block - step } : { from: block + step, to: range.to };
  }
}

/** An entry's block number field as a block number, if it reads as one. */
function blockNumber(v: unknown): number | undefined {
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : typeof v === 'number' ? v : NaN;
  return Number.isSafeInteger(n) ? n : undefined;
}

/** Digits read straight from the bytes stay exact below this many; longer values take `blockNumber`'s path. */
const EXACT_DIGITS = 15;

/**
 * `blockNumber` of a scanned value, read from its bytes where it is plain digits (a string's content, or a
 * number): every row of every page is read for the range check, and a string per row is what this spares.
 */
function scannedBlockNumber(list: ScannedList, entry: number, field: number): number | undefined {
  const tag = list.tag(entry, field);
  if (tag === STRING || tag === OTHER) {
    const s = list.valueStart(entry, field);
    const e = list.valueEnd(entry, field);
    if (e > s && e - s <= EXACT_DIGITS) {
      const bytes = list.bytes;
      let n = 0;
      let i = s;
      for (; i < e; i++) {
        const c = bytes[i]! - 0x30;
        if (c < 0 || c > 9) break;
        n = n * 10 + c;
      }
      if (i === e) return n;
    }
  }
  return blockNumber(list.value(entry, field));
}
