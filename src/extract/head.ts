import type { Accounting } from './accounting.js';
import { emptyResultsOf, fillPath, ShapeError, type ApiCaller } from './endpoint.js';
import { ChainlakeError } from '../errors.js';
import { ApiError } from './errors.js';

/** How the head of a run was found, for the run's log and report. */
export interface FoundHead {
  head: number;
  /** `given`: the job or a flag named it; `latest`: `GET /v1/blocks/latest`; `search`: probes of `/v1/blocks/{n}`. */
  how: 'given' | 'latest' | 'search';
  /** Requests sent to find it (every attempt counted; retries included). */
  requests: number;
  /** Why `latest` was not used, when the head was searched for. */
  latestRefused?: string;
}

export interface HeadSources {
  /** A head named by the job (`range.head`) or a flag (`--head`): taken as is, nothing is asked. */
  given?: number;
  /** Where a search starts: the last head recorded in the catalog, or a hint. */
  near?: number;
  /** The block endpoint's path template (a job's `paths.block`); default `/v1/blocks/{block}`. */
  blockPath?: string;
}

// The block endpoint's id, as `describe --endpoints` lists it (and a job's "paths" names it), and what it is asked for.
const LATEST_LABEL = 'block (latest)';
const PROBE_LABEL = 'block (head search)';

/**
 * The chain head. A given head is used as is. Otherwise `GET /v1/blocks/latest` (undocumented by the spec,
 * served by most services) is asked once; when it is refused or missing (any terminal failure, or an answer
 * without a block number), the head is searched for with the documented `GET /v1/blocks/{n}` alone: a block
 * that is served exists, a 404 (or an empty success) is above the head. From `near`, probes go up (or down)
 * by doubling steps until they straddle the head, then halve the gap: about 2 log2(distance) requests, so a
 * nightly run starting from last night's head spends a couple of dozen, and a first run at 53M blocks ~50.
 * A transient failure (retries exhausted) is thrown: the head is not guessed.
 */
export async function findHead(caller: ApiCaller, acct: Accounting, sources: HeadSources = {}): Promise<FoundHead> {
  if (sources.given !== undefined) return { head: sources.given, how: 'given', requests: 0 };
  const before = acct.requests;
  let refused: string;
  try {
    const results = await caller.get(LATEST_LABEL, blockPathOf(sources.blockPath, 'latest'), {}, acct);
    const n = blockNumberOf(results);
    if (n !== undefined) return { head: n, how: 'latest', requests: acct.requests - before };
    refused = `the answer holds no block number: ${JSON.stringify(results)?.slice(0, 80)}`;
  } catch (e) {
    if (!(e instanceof ApiError && e.kind === 'terminal') && !(e instanceof ShapeError)) throw e;
    refused = e instanceof ApiError ? e.summary + (e.details.apiMessage ? ` (${e.details.apiMessage})` : '') : e.message;
  }
  const head = await searchHead(caller, acct, sources.near ?? 0, sources.blockPath);
  return { head, how: 'search', requests: acct.requests - before, latestRefused: refused };
}

/** The path of block `n` (or `latest`): the job's override of the block endpoint, or the spec's. */
const blockPathOf = (template: string | undefined, n: string): string => fillPath(template ?? '/v1/blocks/{block}', { block: n });

/** The block number of a block record's results (`data.block_number`, an integer or integer text), if any. */
function blockNumberOf(results: unknown): number | undefined {
  const raw = (results as { data?: { block_number?: unknown } } | null)?.data?.block_number;
  const n = typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : raw;
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/**
 * A block endpoint whose answers leave no head to find (every block refused, or none): the API's fault or the wrong
 * path for it, not a transient failure (the same exit as an API's error after the retries).
 */
const headNotFound = (what: string): ChainlakeError =>
  new ChainlakeError(`${PROBE_LABEL}: ${what}; the head cannot be found`, {
    code: 'CHAINLAKE_API_ERROR',
    hint: "check the base URL and the block endpoint's path (the job's paths.block), or give the head (range.head, --head)",
  });

/** Whether block `n` is served: true for a block record, false for a 404 or an empty success. */
async function blockExists(caller: ApiCaller, acct: Accounting, n: number, blockPath?: string): Promise<boolean> {
  try {
    const results = await caller.get(PROBE_LABEL, blockPathOf(blockPath, String(n)), {}, acct);
    return emptyResultsOf(results, ['data']) === undefined;
  } catch (e) {
    if (e instanceof ApiError && e.kind === 'terminal' && e.details.httpStatus === 404) return false;
    throw e;
  }
}

/** The highest served block: exponential probes from `near`, then a binary search of the gap they leave. */
export async function searchHead(caller: ApiCaller, acct: Accounting, near: number, blockPath?: string): Promise<number> {
  const exists = (n: number): Promise<boolean> => blockExists(caller, acct, n, blockPath);
  const start = Math.max(0, Math.floor(near));
  let lo: number; // a block that exists
  let hi: number; // a block above the head
  if (await exists(start)) {
    lo = start;
    let step = 1;
    for (;;) {
      const probe = lo + step;
      if (!Number.isSafeInteger(probe)) throw headNotFound(`no block above ${lo} is refused`);
      if (!(await exists(probe))) {
        hi = probe;
        break;
      }
      lo = probe;
      step *= 2;
    }
  } else {
    hi = start;
    let step = 1;
    for (;;) {
      const probe = Math.max(0, hi - step);
      if (await exists(probe)) {
        lo = probe;
        break;
      }
      if (probe === 0) throw headNotFound('not even block 0 is served');
      hi = probe;
      step *= 2;
    }
  }
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    if (await exists(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}
