import type { Accounting } from '../extract/accounting.js';
import type { ApiCaller } from '../extract/endpoint.js';
import { fillPath } from '../extract/endpoint.js';
import { newRequestRecord } from '../extract/request-log.js';
import type { BlockRange } from '../extract/pager.js';
import { convertTimestamp, Rejected } from '../transform/convert.js';

/** The block endpoint's id (`describe --endpoints`, a job's `paths.block`). */
const BLOCK_ENDPOINT = 'block';

/**
 * The times (UTC, ISO 8601) of a range's first and last block, asked of the block endpoint (explorer #17): two
 * requests, each counted in the window's accounting and recorded as its calls (lineage). A dataset whose rows carry
 * a block time but no block number replaces a window fetched again by them (datasets/scope-rows.ts).
 */
export async function blockTimes(caller: ApiCaller, acct: Accounting, range: BlockRange, blockPath?: string): Promise<{ from: string; to: string }> {
  const timeOf = async (n: number): Promise<string> => {
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
      throw new Error(`block ${n}: the block endpoint gave no time (${JSON.stringify(raw)?.slice(0, 80)}); the window's rows cannot be replaced by time`);
    }
    return t;
  };
  const from = await timeOf(range.from);
  return { from, to: range.to === range.from ? from : await timeOf(range.to) };
}
