// Two phenomena of a chain's unfinal zone, both off by default: a head that reorganises its last blocks, and an
// explorer index that lags the head. See docs/simulator.md ("Reorganisation and a lagging index").

import type { Chain } from './chain.js';

/**
 * A reorganisation of the blocks `(at - depth, at]`. While the head is at or below `at`, those blocks are the
 * orphaned fork: they hold the transactions of the canonical blocks `(at - depth, at + reach]` squeezed into
 * them, so a transaction shows in another block than it will (it moves) and transactions of blocks above `at`
 * show already (once the head passes `at` they are back in their canonical blocks: those still above the head
 * are gone, as a reorganised-away transaction goes back to the mempool). Once the head passes `at`, the chain
 * is the canonical one, the same as a simulator without this option.
 */
export interface ReorgOptions {
  at: number;
  depth: number;
  reach: number;
}

export function checkReorg(r: ReorgOptions): void {
  for (const [k, v] of Object.entries(r)) {
    if (!Number.isSafeInteger(v) || v < (k === 'at' ? 0 : 1)) throw new RangeError(`reorg.${k} must be a positive integer, got ${v}`);
  }
  if (r.depth > r.at) throw new RangeError(`reorg.depth (${r.depth}) must not exceed reorg.at (${r.at})`);
}

let forks = 0;

/**
 * `c` (a view with its own head) serving the orphaned fork while its head is at or below `r.at`. The fork maps
 * each transaction's block through a non-decreasing function that never raises a block, so every index of the
 * chain (sorted by transaction, so by block) stays sorted, and a transaction's position in its block stays
 * non-negative. The fork has its own identity for the caches keyed by chain (logs, extra events).
 */
export function withReorg(c: Chain, r: ReorgOptions): Chain {
  checkReorg(r);
  const canonical = c.txBlk;
  const fork = new Uint32Array(canonical.length);
  const base = r.at - r.depth;
  const span = r.depth + r.reach;
  for (let t = 0; t < canonical.length; t++) {
    const b = canonical[t]!;
    fork[t] = b > base && b <= r.at + r.reach ? base + Math.ceil(((b - base) * r.depth) / span) : b;
  }
  const forkUid = 1_000_000 + ++forks;
  const view = Object.create(c) as Chain;
  const inFork = (): boolean => view.head <= r.at;
  Object.defineProperty(view, 'txBlk', { get: () => (inFork() ? fork : canonical) });
  Object.defineProperty(view, 'uid', { get: () => (inFork() ? forkUid : c.uid) });
  return view;
}

/**
 * The highest block an explorer whose index lags `lag` blocks behind `head` has listed: a listing of blocks
 * above it answers only the rows up to it (short, and complete once the head has moved on).
 */
export const indexedHead = (head: number, lag: number | undefined): number => (lag ? Math.max(0, head - lag) : head);
