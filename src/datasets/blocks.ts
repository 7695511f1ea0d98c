import { blockColumns } from './block-columns.js';
import type { DatasetDef } from './dataset.js';

/** Explorer #17: one block record per scoped block number. */
export const blocks: DatasetDef = {
  name: 'blocks',
  doc: 'Block records of scoped block numbers (explorer #17): miner, reward, fees. One row per block number.',
  kind: 'chain',
  endpoints: [
    {
      id: 'block',
      api: 'explorer',
      ref: '#17 GET /v1/blocks/{block_number}',
      method: 'GET',
      scope: 'block',
      path: '/v1/blocks/{block}',
      paging: { kind: 'none' },
      entriesAt: ['data'],
    },
  ],
  naturalKey: ['block_number'],
  partition: 'block_date',
  partitionFrom: 'timestamp',
  sortBy: ['block_number'],
  blockColumn: 'block_number',
  notes: [
    'One call per block: the job lists block numbers or ranges ("100-200"); a block above the head pinned at run start fails its window (the API answers 404).',
    'block_number is an integer by the spec’s description and a string in its sample; both are accepted.',
  ],
  columns: blockColumns,
};
