import { balances } from './balances.js';
import { blocks } from './blocks.js';
import { contracts } from './contracts.js';
import { dashboard } from './dashboard.js';
import type { DatasetDef } from './dataset.js';
import { extraColumn } from './column.js';
import { erc20_transfers } from './erc20_transfers.js';
import { erc721_transfers } from './erc721_transfers.js';
import { event_logs } from './event_logs.js';
import { internal_transactions } from './internal_transactions.js';
import { mined_blocks } from './mined_blocks.js';
import { nft_inventory } from './nft_inventory.js';
import { pool_info } from './pool_info.js';
import { stable_chart } from './stable_chart.js';
import { staking_info } from './staking_info.js';
import { staking_rewards } from './staking_rewards.js';
import { token_balances } from './token_balances.js';
import { token_holdings } from './token_holdings.js';
import { token_supply } from './token_supply.js';
import { transaction_status } from './transaction_status.js';
import { transactions } from './transactions.js';
import { ChainlakeError } from '../errors.js';

const ALL: DatasetDef[] = [
  // explorer, chain
  transactions,
  internal_transactions,
  erc20_transfers,
  erc721_transfers,
  event_logs,
  mined_blocks,
  blocks,
  // explorer, snapshot
  balances,
  token_holdings,
  nft_inventory,
  token_supply,
  token_balances,
  transaction_status,
  contracts,
  // finance
  stable_chart,
  staking_info,
  staking_rewards,
  dashboard,
  pool_info,
];

/** Nothing an entry carries is dropped: every dataset ends with the `extra` column (see column.ts). */
const withExtra = (d: DatasetDef): DatasetDef => (d.columns.some((c) => c.source === '$extra') ? d : { ...d, columns: [...d.columns, extraColumn] });

/** Every dataset chainlake knows, by name. The one list: CLI choices, describe and the catalog read it. */
export const DATASETS: Readonly<Record<string, DatasetDef>> = Object.freeze(Object.fromEntries(ALL.map((d) => [d.name, withExtra(d)])));

export function datasetNames(): string[] {
  return Object.keys(DATASETS).sort();
}

export function getDataset(name: string): DatasetDef {
  const def = DATASETS[name];
  if (!def) {
    throw new UnknownDatasetError(name);
  }
  return def;
}

export class UnknownDatasetError extends ChainlakeError {
  constructor(readonly dataset: string) {
    super(`unknown dataset '${dataset}'; known datasets: ${datasetNames().join(', ')}`, { code: 'CHAINLAKE_UNKNOWN_DATASET' });
  }
}
