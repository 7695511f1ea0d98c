import { entryCount, type BlockRange, type FetchedPage } from '../page.js';
import type { RangeRows } from './rows.js';

/** Pages one part of a bisected range; `hint`, the parent's first page, when it is also the part's. */
export type PagePart = (part: BlockRange, hint: FetchedPage | undefined) => AsyncGenerator<FetchedPage>;

/**
 * A part's share of the cap: entries are spread unevenly over blocks, so a part sized to the full cap would often
 * overflow it and be split again.
 */
const PART_FILL = 0.9;

/**
 * Fallback without block numbers: parts sized to hold PART_FILL of the cap each (bisection at worst), newest
 * first. When the listing is newest first by timestamp, the probe page is the newest part's first page and
 * is not fetched again.
 */
export async function* bisect(
  probe: FetchedPage,
  range: BlockRange,
  cap: number,
  limit: number,
  rows: RangeRows,
  progress: { splits: number },
  pagePart: PagePart,
): AsyncGenerator<FetchedPage> {
  const count = probe.count;
  const span = range.to - range.from + 1;
  const parts = Math.min(span, Math.max(2, Math.ceil(count / (cap * PART_FILL))));
  progress.splits++;
  rows.uncount(count);
  const reuse = entryCount(probe) === limit && newestFirst(probe.entries) ? probe : undefined;
  for (let i = parts - 1; i >= 0; i--) {
    const from = range.from + Math.floor((span * i) / parts);
    const to = range.from + Math.floor((span * (i + 1)) / parts) - 1;
    if (to >= from) yield* pagePart({ from, to }, i === parts - 1 ? reuse : undefined);
  }
}

/**
 * Whether a page is ordered newest first, judged by the ISO `timestamp` its entries carry: strictly older at
 * least once, never newer. Without that evidence the order is unknown.
 */
function newestFirst(entries: unknown[]): boolean {
  const ts = entries.map((e) => (e !== null && typeof e === 'object' ? (e as Record<string, unknown>).timestamp : undefined));
  if (!ts.every((t) => typeof t === 'string' && !Number.isNaN(Date.parse(t)))) return false;
  const ms = (ts as string[]).map((t) => Date.parse(t));
  return ms.every((t, i) => i === 0 || t <= ms[i - 1]!) && ms[ms.length - 1]! < ms[0]!;
}
