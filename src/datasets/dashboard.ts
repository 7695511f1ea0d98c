import type { DatasetDef } from './dataset.js';
import { periodColumns } from './staking_info.js';

/** Finance GET /dashboard/overview: platform-wide figures. */
export const dashboard: DatasetDef = {
  name: 'dashboard',
  doc: 'Platform overview (finance dashboard/overview) as of the run: volume, fees, APRs and their changes per period (flattened, e.g. volume_24h), TVL, users and swaps. One row per updated_at.',
  kind: 'snapshot',
  endpoints: [
    {
      id: 'dashboard_overview',
      api: 'finance',
      ref: '/dashboard/overview',
      method: 'GET',
      scope: 'none',
      path: '/dashboard/overview',
      paging: { kind: 'none' },
      entriesAt: ['data'],
    },
  ],
  naturalKey: ['updated_at'],
  partition: 'snapshot_date',
  sortBy: ['updated_at'],
  columns: [
    { name: 'updated_at', kind: 'timestamp', nullable: false, doc: 'When the API last updated the figures, UTC.' },
    { name: 'tvl', kind: 'double', nullable: true, doc: 'Total value locked.' },
    { name: 'acc_user', kind: 'bigint', nullable: true, doc: 'Accumulated number of users.' },
    { name: 'total_volume', kind: 'double', nullable: true, doc: 'Total trading volume.' },
    { name: 'total_swap_number', kind: 'bigint', nullable: true, doc: 'Total number of swaps.' },
    { name: 'total_swap_volume', kind: 'double', nullable: true, doc: 'Total swap volume.' },
    ...periodColumns({ fee: 'Fees', fee_change: 'Change of fees' }, ['24h']),
    ...periodColumns({ volume: 'Trading volume', volume_change: 'Change of volume', liquidity_change: 'Change of liquidity' }),
    ...periodColumns({ pool_apr: 'Pool APR', staking_apr: 'Staking APR' }, ['7d']),
  ],
};
