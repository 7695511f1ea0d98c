import { ChainlakeError } from '../errors.js';
import type { Accounting } from '../extract/accounting.js';
import type { BlockTimeBook } from '../load/ledger/block-times.js';
import type { ApiCaller } from '../extract/endpoint.js';
import { fillPath } from '../extract/endpoint.js';
import { newRequestRecord } from '../extract/request-log.js';
import type { BlockRange } from '../extract/pager.js';
import { convertTimestamp, Rejected } from '../transform/convert.js';
import type { Window } from './plan.js';

/** The block endpoint's id (`describe --endpoints`, a job's `paths.block`). */
const BLOCK_ENDPOINT = 'block';

/**
 * Block times already asked through a caller (a run's clients), by path and block: the windows of a run's scopes
 * share their ranges (a contract's scopes, fixed chunks), and each asked the same two blocks again. In a distributed
 * run this is one worker's memory of its run, in front of the run's shared book (the control plane's ledger).
 */
const asked = new WeakMap<ApiCaller, Map<string, Promise<string>>>();

/**
 * Whether a fetched window asks its blocks' times: it replaces rows of its scope and range (fetched again over
 * blocks the lake holds: finality), and its dataset's rows carry a block time but no block number. The run asks
 * by this rule, and a plan counts the requests by it.
 */
export const asksBlockTimes = (w: Pick<Window, 'replaces' | 'range' | 'def'>): boolean =>
  w.replaces === true && w.range !== undefined && w.def.blockColumn === undefined && w.def.blockTimeColumn !== undefined;

/**
 * The requests the block times of `windows` cost a run: each distinct block once (a block another window asked
 * already is not asked again, by any worker of a distributed run: see blockTimes' `book`), the first and last block
 * of each window that asks (asksBlockTimes). Two workers asking one block at the same moment: one asks, the other waits
 * for its time (BlockTimeBook.claim).
 */
export function blockTimeRequests(windows: readonly Pick<Window, 'replaces' | 'range' | 'def'>[]): number[] {
  const asked = new Set<number>();
  return windows.map((w) => {
    if (!asksBlockTimes(w)) return 0;
    const before = asked.size;
    asked.add(w.range!.from);
    asked.add(w.range!.to);
    return asked.size - before;
  });
}

/**
 * The times (UTC, ISO 8601) of a range's first and last block, asked of the block endpoint (explorer #17): up to
 * two requests, each counted in the window's accounting and recorded as its calls (lineage); a block another
 * window of the run asked already is not asked again (its call is that window's). A dataset whose rows carry a
 * block time but no block number replaces a window fetched again by them (datasets/scope-rows.ts).
 *
 * `book`: where the run's times are shared beyond this process (a distributed run's workers: the control plane's
 * `block_times`, load/ledger/block-times.ts). A block it holds is not asked (the window sends no request for it);
 * a block asked is recorded in it, and the time it then holds is the one used.
 */
export async function blockTimes(
  caller: ApiCaller,
  acct: Accounting,
  range: BlockRange,
  blockPath?: string,
  book?: BlockTimeBook,
): Promise<{ from: string; to: string }> {
  const known = asked.get(caller) ?? new Map<string, Promise<string>>();
  asked.set(caller, known);
  const timeOf = (n: number): Promise<string> => {
    const key = `${blockPath ?? ''}\u0000${n}`;
    const cached = known.get(key);
    if (cached) return cached;
    const time = book ? shared(book, n) : ask(n);
    known.set(key, time);
    // A failed ask is asked again by the next window.
    time.catch(() => known.delete(key));
    return time;
  };
  const shared = async (b: BlockTimeBook, n: number): Promise<string> => {
    const found = await b.find(n);
    if (found !== undefined) return found;
    const claim = await b.claim(n);
    if (!claim.claimed) return claim.time;
    let time: string;
    try {
      time = await ask(n);
    } catch (e) {
      // The next asker asks: a claim of a failed ask holds no one up.
      await b.release(n).catch(() => undefined);
      throw e;
    }
    return b.record(n, time);
  };
  const ask = async (n: number): Promise<string> => {
    const record = newRequestRecord(BLOCK_ENDPOINT);
    acct.calls.push(record);
    const received = await caller.getBody(
      `${BLOCK_ENDPOINT} (window times)`,
      fillPath(blockPath ?? '/v1/blocks/{block}', { block: String(n) }),
      {},
      acct,
      'main',
      undefined,
      record,
    );
    record.rows = 1;
    const raw = (received.results as { data?: { timestamp?: unknown } } | null)?.data?.timestamp;
    const t = convertTimestamp(raw);
    if (t instanceof Rejected || typeof t !== 'string') {
      // The answer's shape, not a transient failure: the window fails with the shape code, as any such page does.
      throw new ChainlakeError(
        `block ${n}: the block endpoint gave no time (${JSON.stringify(raw)?.slice(0, 80)}); the window's rows cannot be replaced by time`,
        { code: 'CHAINLAKE_SHAPE' },
      );
    }
    return t;
  };
  const from = await timeOf(range.from);
  return { from, to: range.to === range.from ? from : await timeOf(range.to) };
}
