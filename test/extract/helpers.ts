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
  rows: Record<string, unknown>[];
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
): Promise<Collected> {
  const acct = new Accounting();
  const progress = new WindowProgress();
  let rows: Record<string, unknown>[] = [];
  const pages: FetchedPage[] = [];
  let generation = 0;
  for await (const page of pageWindow(fetch, range, opts, acct, progress)) {
    if ((page.generation ?? 0) > generation) {
      generation = page.generation ?? 0;
      rows = [];
    }
    pages.push({ ...page, entries: [] });
    for (const e of page.entries) rows.push(e as Record<string, unknown>);
    onPage?.(page, pages.length);
  }
  return { rows, pages, acct, progress };
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
