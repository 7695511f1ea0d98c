import { blockColumns } from './block-columns.js';
import type { DatasetDef } from './dataset.js';

/** Explorer #10: blocks mined by an address. */
export const mined_blocks: DatasetDef = {
  name: 'mined_blocks',
  doc: 'Blocks mined by a scoped address (explorer #10). One row per block number.',
  kind: 'chain',
  endpoints: [
    {
      id: 'account_mined_blocks',
      api: 'explorer',
      ref: '#10 GET /v1/accounts/{address_hash}/mined-blocks',
      method: 'GET',
      scope: 'address',
      path: '/v1/accounts/{address}/mined-blocks',
      paging: { kind: 'offset', maxLimit: 1000 },
      entriesAt: ['data'],
    },
  ],
  naturalKey: ['block_number'],
  partition: 'block_date',
  partitionFrom: 'timestamp',
  sortBy: ['block_number'],
  blockColumn: 'block_number',
  notes: [
    'The spec gives this endpoint no block filter (only limit and offset), so a window is the whole listing as of the run: the job range does not narrow it, no watermark advances, and a miner with more blocks than the API’s result window cannot be listed completely (the window fails, saying so).',
    'The spec shows only timestamp and miner; the other fields are those of the block record (#17), nullable.',
  ],
  columns: blockColumns.map((c) => (c.name === 'miner' ? { ...c, nullable: false } : c)),
};
