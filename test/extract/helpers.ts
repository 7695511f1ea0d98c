import { transactions } from '../../src/datasets/transactions.js';
import { Accounting } from '../../src/extract/accounting.js';
import { explorerPageFetcher } from '../../src/extract/endpoint.js';
import { ExplorerClient } from '../../src/extract/explorer.js';
import { pageWindow, WindowProgress, type BlockRange, type FetchedPage, type PageFetcher, type PagerOptions } from '../../src/extract/pager.js';
import { HttpTransport, type TransportOptions } from '../../src/extract/transport.js';
import type { RunningSimulator } from '../../src/simulator/index.js';

/** Retries fast enough for tests (real waits of a few ms); the policy itself is tested with a virtual clock. */
export const FAST_RETRY = { maxAttempts: 12, baseDelayMs: 2, maxDelayMs: 20, maxTotalDelayMs: 60_000 };

export function transport(opts: Partial<TransportOptions> = {}): HttpTransport {
  return new HttpTransport({ concurrency: 4, retry: FAST_RETRY, timeouts: { headersMs: 10_000, bodyMs: 10_000, totalMs: 20_000 }, ...opts });
}

export function explorer(t: HttpTransport, sim: RunningSimulator, apiKey: string | undefined = sim.apiKey): ExplorerClient {
  return new ExplorerClient(t, { baseUrl: sim.urls.mainnet, apiKey });
}

/** The page fetcher of the transactions dataset (#2) for one address. */
export function txFetcher(client: ExplorerClient, address: string): PageFetcher {
  return explorerPageFetcher(client, transactions.endpoints[0]!, { address });
}

export const pagerOptions = (o: Partial<PagerOptions> = {}): PagerOptions => ({ pageSize: 1000, resultWindow: 10_000, prefetch: 4, maxDriftRetries: 3, ...o });

export interface Collected {
  /** The rows of the last generation (empty when `keepRows` is false). */
  rows: Record<string, unknown>[];
  /** Rows of the last generation, and their distinct transaction hashes. */
  count: number;
  keys: Set<string>;
  pages: FetchedPage[];
  acct: Accounting;
  progress: WindowProgress;
}

/**
 * Pages a window to the end, keeping only the last generation's rows (as a consumer must), and returns
 * them with the window's accounting. `onPage` runs between pages (e.g. to move the head).
 */
export async function collect(
  fetch: PageFetcher,
  range: BlockRange | undefined,
  opts: PagerOptions,
  onPage?: (page: FetchedPage, n: number) => void,
  keepRows = true,
): Promise<Collected> {
  const acct = new Accounting();
  const progress = new WindowProgress();
  const out: Collected = { rows: [], count: 0, keys: new Set(), pages: [], acct, progress };
  let generation = 0;
  for await (const page of pageWindow(fetch, range, opts, acct, progress)) {
    if ((page.generation ?? 0) > generation) {
      generation = page.generation ?? 0;
      out.rows = [];
      out.count = 0;
      out.keys.clear();
    }
    out.pages.push({ ...page, entries: [] });
    for (const e of page.entries as Record<string, unknown>[]) {
      if (keepRows) out.rows.push(e);
      out.count++;
      const key = e.transaction_hash ?? e.id;
      if (key !== undefined) out.keys.add(String(key).toLowerCase());
    }
    onPage?.(page, out.pages.length);
  }
  return out;
}

/** The API's own count of an address's transactions in a block range (one direct call). */
export async function apiCount(sim: RunningSimulator, address: string, range?: BlockRange): Promise<number> {
  const u = new URL(`${sim.urls.mainnet}/v1/accounts/${address}/transactions`);
  u.searchParams.set('limit', '1');
  if (range) {
    u.searchParams.set('startBlock', String(range.from));
    u.searchParams.set('endBlock', String(range.to));
  }
  const res = await fetch(u, { headers: { 'api-key': sim.apiKey } });
  const body = (await res.json()) as { results: { count: string } };
  return Number(body.results.count);
}

export function distinct(rows: Record<string, unknown>[], key = 'transaction_hash'): number {
  return new Set(rows.map((r) => String(r[key]).toLowerCase())).size;
}

/** The fewest requests a window can take: one per `pageSize` rows (at least one). */
export const minRequests = (rows: number, pageSize = 1000): number => Math.max(1, Math.ceil(rows / pageSize));

/** The most events inside any half-open window [t, t + widthMs). */
export function maxInWindow(times: number[], widthMs = 1000): number {
  const ts = [...times].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; i < ts.length; i++) {
    while (ts[i]! - ts[j]! >= widthMs) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}
