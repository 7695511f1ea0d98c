import type { DatasetDef, EndpointDef, Network } from '../datasets/dataset.js';
import { getDataset } from '../datasets/registry.js';
import type { Query } from '../extract/explorer.js';
import type { BlockRange } from '../extract/pager.js';
import type { JobRange, JobSource, JobWhat } from './job.js';
import { bugError } from '../errors.js';

/**
 * Rows after which a run cuts a joined block range into the next window (see joinWindows in prepare.ts):
 * large enough that a window's closing count (one request per window paged past the result window) is a
 * negligible share of its pages and that the demo chain's busiest scope is one window; small enough that a
 * kill loses at most one window's pages per window in flight.
 */
export const WINDOW_ROWS = 200_000;

/**
 * The requests a run spends on a window whose range counts `rows` rows: the rule the run keeps, and the one
 * `chainlake plan` estimates with (issue 20). An offset-paged window costs its pages, ceil(rows / pageSize),
 * and one request when empty. Past the result window: joined ranges (the default) are paged on by block with
 * no request lost, plus one closing count per window of up to `windowRows` rows; fixed chunks (an explicit
 * windowBlocks) pay what bisection did before, the probe and a partial page per part. Endpoints that do not
 * page are one call.
 */
export function requestsForRows(
  rows: number,
  w: { paged: boolean; ranged: boolean },
  source: Pick<JobSource, 'pageSize' | 'resultWindow'>,
  range: Pick<JobRange, 'fixedChunks'>,
  windowRows = WINDOW_ROWS,
): number {
  if (!w.paged) return 1;
  const pages = Math.max(1, Math.ceil(rows / source.pageSize));
  if (rows <= source.resultWindow || !w.ranged) return pages;
  if (!range.fixedChunks) return pages + Math.ceil(rows / windowRows);
  return 1 + pages + Math.ceil(rows / (source.resultWindow * 0.9));
}

/** One unit of fetching, commit, resume and reporting: a dataset, an endpoint, a scope, a block range. */
export interface Window {
  id: string;
  def: DatasetDef;
  endpoint: EndpointDef;
  network: Network;
  scope: Record<string, string>;
  /** Stable text of the scope, the key of watermarks (`address=0x…`). */
  scopeKey: string;
  /** Endpoints with a block filter only; other windows are one call (or one paged listing) as of the run. */
  range?: BlockRange;
  query: Query;
  /**
   * The run's last final block (its head − finalityDepth), when the job has an unfinal zone: a window reaching
   * above it is committed as provisional, and no watermark passes it.
   */
  final?: number;
  /**
   * Fetched again over blocks an earlier run committed (the scope has a watermark and the job an unfinal zone, or
   * `verify --repair` fetches a window that differs): its rows replace what the lake holds of its scope and range
   * (load/write/replace.ts).
   */
  replaces?: boolean;
  /**
   * Set once fetched, for a replacing window of a dataset whose rows carry a block time but no block number: the
   * times of its first and last block, by which its rows replace the lake's (datasets/scope-rows.ts).
   */
  times?: { from: string; to: string };
}

/** Whether a committed window is provisional: it reaches into the unfinal zone, so the next run fetches it again. */
export const isProvisional = (w: Pick<Window, 'range' | 'final'>): boolean => w.final !== undefined && w.range !== undefined && w.range.to > w.final;

export const scopeKeyOf = (scope: Record<string, string>): string =>
  Object.entries(scope)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${v}`)
    .join('&') || '-';

/** A window's id: readable, and the same for the same dataset, network, scope and range in every run. */
export const windowIdOf = (dataset: string, network: string, scopeKey: string, range: BlockRange | undefined): string =>
  `${dataset}/${network}/${scopeKey}/${range ? `${range.from}-${range.to}` : 'snapshot'}`;

/** The closed block range a job covers once the head is pinned. */
export function jobRange(what: JobWhat, head: number): BlockRange {
  return { from: what.range.fromBlock, to: what.range.toBlock === 'head' ? head : Math.min(what.range.toBlock, head) };
}

/**
 * The scope key of a window: its scope values, plus the endpoint when the dataset has several (two endpoints
 * of one scope are separate windows with separate watermarks and resume records).
 */
export function windowScopeKey(def: DatasetDef, endpoint: EndpointDef, scope: Record<string, string>): string {
  return scopeKeyOf(def.endpoints.length > 1 ? { ...scope, endpoint: endpoint.id } : scope);
}

/**
 * The block chunks of `range`: aligned to multiples of `windowBlocks` (`[0, W-1]`, `[W, 2W-1]`, …), clipped to
 * the range. Aligned, not counted from the range's start, so a chunk has the same bounds (and so the same
 * window id and resume key) in every run whatever its head or first block: only the last, open chunk grows.
 */
export function blockChunks(range: BlockRange, windowBlocks: number): BlockRange[] {
  if (!Number.isSafeInteger(windowBlocks) || windowBlocks < 1) throw new RangeError(`windowBlocks must be a positive integer, got ${windowBlocks}`);
  const chunks: BlockRange[] = [];
  for (let start = Math.floor(range.from / windowBlocks) * windowBlocks; start <= range.to; start += windowBlocks) {
    chunks.push({ from: Math.max(start, range.from), to: Math.min(start + windowBlocks - 1, range.to) });
  }
  return chunks;
}

/**
 * Turns a job into windows. An endpoint with a block filter gets the job's range cut into block chunks of
 * `range.windowBlocks` (nothing when the pinned head is below the job's first block); any other endpoint is
 * one listing or call as of the run (a snapshot window).
 *
 * Order: chunks are outermost — every dataset, endpoint and scope of the first chunk, then of the second, … —
 * so the windows in flight and each batch commit sweep forward through the chain and touch the daily
 * partitions of a few chunks, not every day of the chain (which made every batch rewrite every partition).
 * Within a chunk, the job's dataset order, then endpoint, then scope order. Snapshot windows keep their place
 * in the first pass (beside the first chunk): they are taken as of the run, so early, close to the pinned
 * head; and a job whose range fits in one chunk plans exactly the windows, in the order, it did before chunks.
 */
export function planWindows(what: JobWhat, head: number): Window[] {
  return [...windowsOf(what, head)];
}

/**
 * The windows of `planWindows`, one at a time: a run narrows them as they come, so a long chain times many
 * scopes (say 200 chunks × 5,000 addresses) is never held whole when most chunks are already in the lake.
 */
export function* windowsOf(what: JobWhat, head: number): Generator<Window> {
  const range = jobRange(what, head);
  const chunks = range.to < range.from ? [] : blockChunks(range, what.range.windowBlocks);
  // One slot per (dataset, endpoint, scope) in job order; a ranged slot is repeated once per chunk.
  const slots: { def: DatasetDef; endpoint: EndpointDef; scope: Record<string, string>; scopeKey: string; ranged: boolean; query: Query }[] = [];
  for (const ds of what.datasets) {
    const def = getDataset(ds.name);
    for (const id of ds.endpoints) {
      const endpoint = def.endpoints.find((e) => e.id === id);
      if (!endpoint) throw bugError(`dataset ${def.name} has no endpoint ${id}`);
      for (const scope of ds.scopes[endpoint.scope] ?? []) {
        slots.push({ def, endpoint, scope, scopeKey: windowScopeKey(def, endpoint, scope), ranged: endpoint.blockRange !== undefined, query: ds.query });
      }
    }
  }
  const windowOf = (s: (typeof slots)[number], r: BlockRange | undefined): Window => ({
    id: windowIdOf(s.def.name, what.network, s.scopeKey, r),
    def: s.def,
    endpoint: s.endpoint,
    network: what.network,
    scope: s.scope,
    scopeKey: s.scopeKey,
    range: r,
    query: s.query,
  });
  for (const s of slots) {
    if (!s.ranged) yield windowOf(s, undefined);
    else if (chunks.length > 0) yield windowOf(s, chunks[0]);
  }
  for (const chunk of chunks.slice(1)) for (const s of slots) if (s.ranged) yield windowOf(s, chunk);
}
