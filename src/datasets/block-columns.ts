import type { ColumnDef } from './column.js';

/** The block record (#17) and the mined-block entry (#10) share these fields. */
export const blockColumns: ColumnDef[] = [
  { name: 'block_number', kind: 'bigint', nullable: false, doc: 'Block number.' },
  { name: 'timestamp', kind: 'timestamp', nullable: false, doc: 'UTC time of the block.' },
  { name: 'miner', kind: 'address', nullable: true, doc: 'Address of the block’s miner, lower-case.' },
  { name: 'reward', kind: 'amount', nullable: true, doc: 'Total reward of the block in wei (mining reward plus fees).' },
  { name: 'fees', kind: 'amount', nullable: true, doc: 'Fees collected in the block, in wei.' },
  { name: 'mining_reward', kind: 'amount', nullable: true, doc: 'Reward set at block creation, in wei.' },
];
