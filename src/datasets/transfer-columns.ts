import type { ColumnDef } from './column.js';

/** Columns every token-transfer entry carries (ERC-20 #4, ERC-721 #5 and #25). */
export const transferColumns: ColumnDef[] = [
  { name: 'block_number', kind: 'bigint', nullable: false, doc: 'Block containing the transfer.' },
  { name: 'timestamp', kind: 'timestamp', nullable: false, doc: 'UTC time of the block.' },
  { name: 'transaction_hash', kind: 'hash', nullable: false, doc: 'Hash of the transaction that made the transfer, lower-case.' },
  { name: 'transaction_index', kind: 'bigint', nullable: false, doc: 'Index of that transaction within its block.' },
  { name: 'block_hash', kind: 'hash', nullable: true, doc: 'Hash of the block, lower-case.' },
  { name: 'token_address', kind: 'address', nullable: false, doc: 'Token contract, lower-case.' },
  { name: 'sender', kind: 'address', nullable: false, doc: 'Address the tokens left (the zero address for a mint), lower-case.' },
  { name: 'receiver', kind: 'address', nullable: false, doc: 'Address the tokens went to, lower-case.' },
];

/** Token metadata the transfer entries repeat; the API gives NULL for tokens without it. */
export const tokenMetaColumns: ColumnDef[] = [
  { name: 'token_name', kind: 'text', nullable: true, doc: 'Token name; NULL when the token has none.' },
  { name: 'token_symbol', kind: 'text', nullable: true, doc: 'Token symbol; NULL when the token has none.' },
  { name: 'token_decimals', kind: 'bigint', nullable: true, doc: 'Decimals of the token; NULL when unknown.' },
];

export const confirmationsColumn: ColumnDef = {
  name: 'confirmations',
  kind: 'bigint',
  nullable: true,
  doc: 'Confirmations reported by the API at ingestion time (changes as the chain grows).',
};

/** Decimal token ids: identifiers up to 2^256-1, kept as exact text (never summed). */
export const TOKEN_ID = /^\d{1,78}$/;
