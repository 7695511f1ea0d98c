// The real dialect's listing that ignores its block range filter (Blockscout #9321): asked for a block range, it
// answers the scope's whole listing. Off by default (SimulatorOptions.ignoresRangeFilter); chainlake must detect
// it (the pager refuses such rows, `verify` reports it), never store or count it as the range.

/** The block range parameters of the explorer's listings (accounts use camelCase, event logs snake_case). */
const RANGE_PARAMS = ['startBlock', 'endBlock', 'start_block', 'end_block'];

/** The query as such a listing reads it: without its block range. */
export function withoutRangeFilter(query: URLSearchParams): URLSearchParams {
  const q = new URLSearchParams(query);
  for (const p of RANGE_PARAMS) q.delete(p);
  return q;
}
