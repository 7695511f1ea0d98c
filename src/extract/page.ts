// A page as the pager fetches it, and what reading one needs: apart from the pager so that the pager's helpers
// (block-seek.ts) read pages without importing the pager back.

import type { Accounting } from './accounting.js';
import type { ScannedList } from './scan.js';

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

/** A page's body as received. It stands for the page only while `entries` is the same list (`page.entries === raw.entries`). */
export interface RawPage {
  bytes: Buffer;
  /** Path from the body's root to the entries' list. */
  entriesAt: readonly string[];
  /** Where `list` is set, parsed on first read (the same array as the page's `entries`). */
  entries: unknown[];
  /** The entries' list as located in `bytes` by the scanner, with the values of the fields the dataset reads. */
  list?: ScannedList;
}

export interface FetchedPage {
  /** The entries; where the body was scanned (`raw.list`), parsed from its bytes on first read. */
  entries: unknown[];
  /** How many entries, where reading `entries` would cost a parse; see `entryCount`. */
  size?: number;
  /**
   * The body as received, when the entries are its list as is. A page made from another one's entries (a cut
   * of them) has none: it must not keep its source's.
   */
  raw?: RawPage;
  /**
   * A page cut short (its entries the first ones of another page's): the body those came from, whose list
   * starts with this page's entries. Only for reading values' digits as received (transform/exact-extra.ts);
   * the body is not this page's.
   */
  cutFrom?: RawPage;
  /** The envelope's results object, for fields that sit beside `data` (token_name, to_block...). */
  results: Record<string, unknown>;
  count: number;
  offset: number;
  range?: BlockRange;
  /**
   * Set by the pager: 0 on the first pass over the window, n on its n-th refetch (after count drift or a
   * newly learned cap). A consumer that sees a higher generation must drop what it took from lower ones.
   */
  generation?: number;
}

export type PageFetcher = (req: PageRequest, acct: Accounting) => Promise<FetchedPage>;

/** How many entries a page holds, without parsing entries that are still bytes. */
export const entryCount = (page: FetchedPage): number => page.size ?? page.entries.length;

/** The scanned list of a page's own entries, if its body was scanned. */
export const scannedList = (page: FetchedPage): ScannedList | undefined => {
  const list = page.raw?.list;
  return list && list.count === entryCount(page) ? list : undefined;
};
