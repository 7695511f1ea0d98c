import type { ColumnDef } from './column.js';
import type { DatasetDef } from './dataset.js';
import { snake } from './staking_info.js';

const FIGURES: Record<string, string> = {
  totalStakedGrand: 'Total staked in the Grand pool',
  totalRewardGrand: 'Total reward of the Grand pool',
  totalStakedLiquid: 'Total staked in the Liquid pool',
  totalRewardLiquid: 'Total reward of the Liquid pool',
};

/** `_staking_reward` gives wei strings (exact amounts); `staking_reward` the same figures as coin numbers. */
const rewardColumns: ColumnDef[] = Object.entries(FIGURES).flatMap(([field, doc]) => [
  { name: snake(field), source: `_staking_reward.${field}`, kind: 'amount' as const, nullable: true, doc: `${doc}, in wei (exact, from _staking_reward).` },
  {
    name: `${snake(field)}_coins`,
    source: `staking_reward.${field}`,
    kind: 'double' as const,
    nullable: true,
    doc: `${doc}, in whole coins (from staking_reward).`,
  },
]);

/** Finance GET /staking/getRewardInfo. */
export const staking_rewards: DatasetDef = {
  name: 'staking_rewards',
  doc: 'Staking totals (finance getRewardInfo) at scoped blocks, or at the latest block when the job names none: wei strings as DECIMAL(38,0) amounts, coin figures as DOUBLE. One row per requested block per snapshot date.',
  kind: 'snapshot',
  endpoints: [
    {
      id: 'reward_info',
      api: 'finance',
      ref: '/staking/getRewardInfo',
      method: 'GET',
      scope: 'block_or_latest',
      path: '/staking/getRewardInfo',
      scopeQuery: { block_number: 'block' },
      paging: { kind: 'none' },
      entriesAt: ['data'],
    },
  ],
  naturalKey: ['block_number'],
  partition: 'snapshot_date',
  sortBy: ['block_number'],
  notes: [
    'block_number is the block the job asked for; NULL means the API’s latest at the time of the run (one such row per snapshot date, the last run of the day wins).',
  ],
  columns: [
    { name: 'block_number', source: '$scope.block', kind: 'bigint', nullable: true, doc: 'The requested block; NULL for the latest.' },
    ...rewardColumns,
  ],
};
