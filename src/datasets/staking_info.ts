import type { ColumnDef } from './column.js';
import type { DatasetDef } from './dataset.js';

export const PERIODS = ['24h', '7d', '1m', '1y'] as const;

/** `reward_liquidityWD` -> `reward_liquidity_wd`: lake columns are snake_case. */
export const snake = (field: string): string => field.replace(/([a-z0-9])([A-Z]+)/g, '$1_$2').toLowerCase();

/** One DOUBLE column per (figure, period), named `<figure>_<period>`, read from the API's `<period>.<figure>`. */
export function periodColumns(figures: Record<string, string>, periods: readonly string[] = PERIODS): ColumnDef[] {
  return periods.flatMap((p) =>
    Object.entries(figures).map(([field, doc]) => ({
      name: `${snake(field)}_${p}`,
      source: `${p}.${field}`,
      kind: 'double' as const,
      nullable: true,
      doc: `${doc} (period ${p}).`,
    })),
  );
}

/** Finance GET /staking/info_list: one staking pool's figures. */
export const staking_info: DatasetDef = {
  name: 'staking_info',
  doc: 'Staking pool figures (finance info_list) of scoped pids as of the run: liquidity and rewards, and their changes over 24h, 7d, 1m and 1y (period objects flattened, e.g. liquidity_change_24h). One row per (pid, updated_at).',
  kind: 'snapshot',
  endpoints: [
    {
      id: 'staking_info_list',
      api: 'finance',
      ref: '/staking/info_list',
      method: 'GET',
      scope: 'pid',
      path: '/staking/info_list',
      scopeQuery: { pid: 'pid' },
      paging: { kind: 'none' },
      entriesAt: ['data'],
    },
  ],
  naturalKey: ['pid', 'updated_at'],
  partition: 'snapshot_date',
  sortBy: ['pid', 'updated_at'],
  notes: ['Every state the API reports (its updated_at) is kept once; runs that see the same state add nothing.'],
  columns: [
    { name: 'pid', kind: 'bigint', nullable: false, doc: 'Staking pool id (0 and 1 in the spec).' },
    { name: 'updated_at', kind: 'timestamp', nullable: false, doc: 'When the API last updated the figures, UTC.' },
    { name: 'liquidity', kind: 'double', nullable: true, doc: 'Accumulated staking liquidity.' },
    { name: 'reward_amount', kind: 'double', nullable: true, doc: 'Accumulated reward.' },
    { name: 'reward_liquidity_wd', source: 'reward_liquidityWD', kind: 'double', nullable: true, doc: 'Accumulated reward expressed in the stable token.' },
    ...periodColumns({
      liquidity_change: 'Change of liquidity',
      reward_amount_change: 'Change of the reward',
      reward_liquidityWD_change: 'Change of the reward in the stable token',
    }),
  ],
};
