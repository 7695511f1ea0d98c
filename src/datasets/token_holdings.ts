import type { DatasetDef, EndpointDef } from './dataset.js';
import { TOKEN_ID } from './transfer-columns.js';

const listing = (e: Omit<EndpointDef, 'api' | 'method' | 'scope' | 'paging'>): EndpointDef => ({
  api: 'explorer',
  method: 'GET',
  scope: 'address',
  paging: { kind: 'offset', maxLimit: 1000 },
  ...e,
});

/** Explorer #6 (both groups), #7, #8, #22, #24: what tokens an address holds, as each endpoint tells it. */
export const token_holdings: DatasetDef = {
  name: 'token_holdings',
  doc: 'Token holdings of scoped addresses as of the run: ERC-20 and ERC-721 balances (explorer #6), token lists (#7, #8, #24) and held ERC-721 tokens by id (#22). One row per (origin_endpoint, holder, token, token id) per snapshot date.',
  kind: 'snapshot',
  endpoints: [
    listing({
      id: 'account_tokens_erc20',
      ref: '#6 GET /v1/accounts/{address_hash}/tokens (erc_20 group)',
      path: '/v1/accounts/{address}/tokens',
      entriesAt: ['erc_20', 'results'],
      countAt: ['erc_20', 'count'],
      meta: { standard: 'ERC-20' },
    }),
    listing({
      id: 'account_tokens_erc721',
      ref: '#6 GET /v1/accounts/{address_hash}/tokens (erc_721 group)',
      path: '/v1/accounts/{address}/tokens',
      entriesAt: ['erc_721', 'results'],
      countAt: ['erc_721', 'count'],
      meta: { standard: 'ERC-721' },
    }),
    listing({
      id: 'account_erc20_tokens',
      ref: '#7 GET /v1/accounts/{address_hash}/tokens/erc20',
      path: '/v1/accounts/{address}/tokens/erc20',
      entriesAt: ['data'],
      meta: { standard: 'ERC-20' },
      entryFields: { fill: { holder_address: '$scope.address' } },
    }),
    listing({
      id: 'account_erc721_tokens',
      ref: '#8 GET /v1/accounts/{address_hash}/tokens/erc721',
      path: '/v1/accounts/{address}/tokens/erc721',
      entriesAt: ['data'],
      meta: { standard: 'ERC-721' },
      entryFields: { fill: { holder_address: '$scope.address' } },
    }),
    listing({
      id: 'erc721_tokens',
      ref: '#22 GET /v1/erc-721/{address_hash}/tokens',
      path: '/v1/erc-721/{address}/tokens',
      entriesAt: ['data'],
      meta: { standard: 'ERC-721' },
      entryFields: { rename: { owner: 'holder_address', contract_address: 'token_address' } },
    }),
    listing({
      id: 'erc721_contracts',
      ref: '#24 GET /v1/erc-721/{address_hash}/contracts',
      path: '/v1/erc-721/{address}/contracts',
      entriesAt: ['data'],
      meta: { standard: 'ERC-721' },
      entryFields: { fill: { holder_address: '$scope.address' } },
    }),
  ],
  naturalKey: ['origin_endpoint', 'holder_address', 'token_address', 'token_id'],
  partition: 'snapshot_date',
  sortBy: ['holder_address', 'token_address', 'origin_endpoint', 'token_id'],
  notes: [
    'Each endpoint tells a different part of the story (balances, token lists, held token ids), so rows keep their origin_endpoint and the key includes it; filter on it before counting.',
    'The two groups of #6 are paged independently (each with its own count), as two endpoints over one path.',
    'Rows of #7, #8 and #24 name no holder: it is the scoped address.',
  ],
  columns: [
    { name: 'origin_endpoint', source: '$meta.endpoint', kind: 'text', nullable: false, doc: 'Which endpoint gave the row (see describe: endpoints).' },
    { name: 'standard', source: '$meta.standard', kind: 'text', nullable: false, doc: 'ERC-20 or ERC-721.' },
    { name: 'holder_address', kind: 'address', nullable: false, doc: 'The holder, lower-case.' },
    { name: 'token_address', kind: 'address', nullable: false, doc: 'The token contract, lower-case.' },
    { name: 'token_id', kind: 'text', pattern: TOKEN_ID, nullable: true, doc: 'Held ERC-721 token id as exact decimal text (#22 only).' },
    {
      name: 'balance',
      kind: 'amount',
      nullable: true,
      doc: 'Balance in the token’s smallest unit (ERC-721: number of tokens) (#6 only). NULL when >= 10^38; see balance_raw.',
    },
    { name: 'holder_type', kind: 'text', nullable: true, doc: 'Kind of holder as the API gives it, e.g. eoa or contract (#6 erc_20 group only).' },
    { name: 'token_name', kind: 'text', nullable: true, doc: 'Token name (#7, #8, #22, #24).' },
    { name: 'token_symbol', kind: 'text', nullable: true, doc: 'Token symbol (#7, #8, #22, #24).' },
    { name: 'token_decimals', kind: 'bigint', nullable: true, doc: 'Token decimals (#6 erc_20 group, #22).' },
    { name: 'token_uri', kind: 'text', nullable: true, doc: 'Metadata URI of a held ERC-721 token (#22 only).' },
  ],
};
