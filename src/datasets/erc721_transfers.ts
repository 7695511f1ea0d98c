import type { DatasetDef } from './dataset.js';
import { confirmationsColumn, TOKEN_ID, tokenMetaColumns, transferColumns } from './transfer-columns.js';

/** Explorer #5 (accounts group) and #25 (erc-721 group): ERC-721 transfers of an address, in one table. */
export const erc721_transfers: DatasetDef = {
  name: 'erc721_transfers',
  doc: 'ERC-721 transfers in which a scoped address is sender or receiver, from explorer #5 (accounts group: no token id) and #25 (erc-721 group: token id, URI, gas). The column origin_endpoint records which endpoint gave the row.',
  kind: 'chain',
  endpoints: [
    {
      id: 'account_erc721_transfers',
      api: 'explorer',
      ref: '#5 GET /v1/accounts/{address_hash}/token-transfer/erc721',
      method: 'GET',
      scope: 'address',
      path: '/v1/accounts/{address}/token-transfer/erc721',
      paging: { kind: 'offset', maxLimit: 1000 },
      blockRange: { start: 'startBlock', end: 'endBlock' },
      scopeColumns: { address: ['sender', 'receiver'] },
      entriesAt: ['data'],
    },
    {
      id: 'erc721_token_transfers',
      api: 'explorer',
      ref: '#25 GET /v1/erc-721/{address_hash}/token-transfer',
      method: 'GET',
      scope: 'address',
      path: '/v1/erc-721/{address}/token-transfer',
      paging: { kind: 'offset', maxLimit: 1000 },
      // startBlock is required here; every window has a range, so it is always sent.
      blockRange: { start: 'startBlock', end: 'endBlock' },
      scopeColumns: { address: ['sender', 'receiver'] },
      entriesAt: ['data'],
    },
  ],
  naturalKey: ['origin_endpoint', 'transaction_hash', 'token_address', 'sender', 'receiver', 'token_id', 'ordinal'],
  partition: 'block_date',
  partitionFrom: 'timestamp',
  sortBy: ['block_number', 'transaction_index', 'token_address', 'origin_endpoint', 'ordinal'],
  blockColumn: 'block_number',
  ordinal: { over: ['origin_endpoint', 'transaction_hash', 'token_address', 'sender', 'receiver', 'token_id'], groupBy: ['block_number', 'transaction_index'] },
  notes: [
    'Rows of #5 carry no token id (the API does not give one), so identical transfers of a transaction are told apart by an ordinal, as in erc20_transfers.',
    'A transfer listed by both endpoints gives two rows, one per origin_endpoint; filter on it to count transfers once.',
  ],
  columns: [
    {
      name: 'origin_endpoint',
      source: '$meta.endpoint',
      kind: 'text',
      nullable: false,
      doc: 'Which endpoint gave the row: account_erc721_transfers (#5) or erc721_token_transfers (#25).',
    },
    ...transferColumns,
    { name: 'token_id', kind: 'text', pattern: TOKEN_ID, nullable: true, doc: 'Token id as exact decimal text (#25 only; NULL from #5).' },
    {
      name: 'ordinal',
      source: '$ordinal',
      kind: 'bigint',
      nullable: false,
      doc: '0 for the first of identical transfers within the transaction and origin, 1 for the next…',
    },
    { name: 'token_uri', kind: 'text', nullable: true, doc: 'Metadata URI of the token (#25 only).' },
    { name: 'standard', kind: 'text', nullable: true, doc: 'Token standard as the API names it, e.g. ERC-721 (#25 only).' },
    ...tokenMetaColumns,
    { name: 'nonce', kind: 'bigint', nullable: true, doc: 'Nonce of the transaction (#25 only).' },
    { name: 'gas_limit', kind: 'bigint', nullable: true, doc: 'Gas limit of the transaction (#25 only).' },
    { name: 'gas_price', kind: 'amount', nullable: true, doc: 'Gas price in wei (#25 only).' },
    { name: 'gas_used', kind: 'bigint', nullable: true, doc: 'Gas used by the transaction (#25 only).' },
    { name: 'cumulative_gas_used', kind: 'bigint', nullable: true, doc: 'Gas used in the block up to and including the transaction (#25 only).' },
    confirmationsColumn,
  ],
};
