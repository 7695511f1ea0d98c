import type { DatasetDef } from './dataset.js';
import { confirmationsColumn, tokenMetaColumns, transferColumns } from './transfer-columns.js';

/** Explorer #4: ERC-20 transfers from or to an address. */
export const erc20_transfers: DatasetDef = {
  name: 'erc20_transfers',
  doc: 'ERC-20 token transfers in which a scoped address is sender or receiver (explorer #4). The API gives no log index, so identical transfers of one transaction are told apart by an ordinal.',
  kind: 'chain',
  endpoints: [
    {
      id: 'account_erc20_transfers',
      api: 'explorer',
      ref: '#4 GET /v1/accounts/{address_hash}/token-transfer/erc20',
      method: 'GET',
      scope: 'address',
      path: '/v1/accounts/{address}/token-transfer/erc20',
      paging: { kind: 'offset', maxLimit: 1000 },
      blockRange: { start: 'startBlock', end: 'endBlock' },
      scopeColumns: { address: ['sender', 'receiver'] },
      entriesAt: ['data'],
    },
  ],
  naturalKey: ['transaction_hash', 'token_address', 'sender', 'receiver', 'value', 'value_raw', 'ordinal'],
  partition: 'block_date',
  partitionFrom: 'timestamp',
  sortBy: ['block_number', 'transaction_index', 'token_address', 'ordinal'],
  blockColumn: 'block_number',
  ordinal: { over: ['transaction_hash', 'token_address', 'sender', 'receiver', 'value'], groupBy: ['block_number', 'transaction_index'] },
  notes: [
    'Natural key: the identifying fields plus the ordinal among identical entries (same transaction, token, sender, receiver and value). Identical entries appear together in every listing that shows them, so the ordinal is the same whichever scoped address listed them.',
  ],
  columns: [
    ...transferColumns,
    { name: 'value', kind: 'amount', nullable: false, doc: 'Amount in the token’s smallest unit. NULL when >= 10^38 (up to 2^256-1); see value_raw.' },
    {
      name: 'ordinal',
      source: '$ordinal',
      kind: 'bigint',
      nullable: false,
      doc: '0 for the first of identical transfers within the transaction, 1 for the next…',
    },
    ...tokenMetaColumns,
    confirmationsColumn,
  ],
};
