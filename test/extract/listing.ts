import type { Accounting } from '../../src/extract/accounting.js';
import { ApiError } from '../../src/extract/errors.js';
import type { FetchedPage, PageFetcher, PageRequest } from '../../src/extract/pager.js';

/**
 * An in-memory listing API with the explorer's paging rules (count, offset + limit ≤ cap, block filter),
 * for pager edge cases the simulator's chain does not have (ascending order, a block of exactly the cap).
 * It stands in for the API, not for any stage of ours.
 */
export class Listing {
  requests: PageRequest[] = [];
  constructor(
    /** Rows per block, index = block number. */
    readonly perBlock: number[],
    readonly cap: number,
    readonly order: 'desc' | 'asc' = 'desc',
    readonly withBlocks = true,
    /** Entries carry an ISO timestamp (one second per block), like event logs that have no block number. */
    readonly withTimestamps = false,
  ) {}

  rows(from: number, to: number): { block_number?: string; timestamp?: string; id: string }[] {
    const out: { block_number?: string; timestamp?: string; id: string }[] = [];
    const blocks = [];
    for (let b = from; b <= Math.min(to, this.perBlock.length - 1); b++) blocks.push(b);
    if (this.order === 'desc') blocks.reverse();
    for (const b of blocks) {
      const n = this.perBlock[b]!;
      for (let i = 0; i < n; i++) {
        const idx = this.order === 'desc' ? n - 1 - i : i;
        const row: { block_number?: string; timestamp?: string; id: string } = { id: `${b}:${idx}` };
        if (this.withBlocks) row.block_number = String(b);
        if (this.withTimestamps) row.timestamp = new Date(Date.UTC(2024, 0, 1) + b * 1000).toISOString().replace('.000Z', 'Z');
        out.push(row);
      }
    }
    return out;
  }

  readonly fetch: PageFetcher = async (req: PageRequest, acct: Accounting): Promise<FetchedPage> => {
    this.requests.push(req);
    acct.recordRequest();
    await Promise.resolve();
    if (req.offset + req.limit > this.cap) {
      throw new ApiError('HTTP 400', {
        kind: 'terminal',
        reason: 'http-4xx',
        endpoint: 'listing',
        url: 'memory://listing',
        attempt: 1,
        httpStatus: 400,
        envelopeStatus: '400',
        apiMessage: `Result window is too large, offset + limit must be less than or equal to ${this.cap}`,
      });
    }
    const all = this.rows(req.range?.from ?? 0, req.range?.to ?? this.perBlock.length - 1);
    return { entries: all.slice(req.offset, req.offset + req.limit), results: {}, count: all.length, offset: req.offset, range: req.range };
  };
}
