import type { DatasetDef } from './dataset.js';
import { periodColumns } from './staking_info.js';

/** Finance GET /pool/info_list: one pool's figures. */
export const pool_info: DatasetDef = {
  name: 'pool_info',
  doc: 'Swap pool figures (finance pool/info_list) of scoped pools as of the run: liquidity, volumes, APR and changes per period (flattened, e.g. volume_24h). One row per (pool_address, updated_at).',
  kind: 'snapshot',
  endpoints: [
    {
      id: 'pool_info_list',
      api: 'finance',
      ref: '/pool/info_list',
      method: 'GET',
      scope: 'pool',
      path: '/pool/info_list',
      scopeQuery: { pool: 'pool' },
      paging: { kind: 'none' },
      entriesAt: ['data'],
    },
  ],
  naturalKey: ['pool_address', 'updated_at'],
  partition: 'snapshot_date',
  sortBy: ['pool_address', 'updated_at'],
  notes: ['volume figures are numbers in the spec’s schema and strings in its sample: both are read as DOUBLE.'],
  columns: [
    { name: 'pool_address', kind: 'address', nullable: false, doc: 'The pool contract, lower-case.' },
    { name: 'updated_at', kind: 'timestamp', nullable: false, doc: 'When the API last updated the figures, UTC.' },
    { name: 'liquidity', kind: 'double', nullable: true, doc: 'Pool liquidity.' },
    ...periodColumns({ volume: 'Trading volume', volume_change: 'Change of volume', liquidity_change: 'Change of liquidity' }),
    ...periodColumns({ apr: 'APR', apr_change: 'Change of APR' }, ['7d']),
    ...periodColumns({ swap_volume: 'Swap volume', swap_volume_change: 'Change of swap volume' }, ['24h']),
  ],
};
