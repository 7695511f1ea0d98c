import type { DatasetDef, EndpointDef } from './dataset.js';
import { TOKEN_ID } from './transfer-columns.js';

const listing = (e: Omit<EndpointDef, 'api' | 'method' | 'paging' | 'entriesAt'>): EndpointDef => ({
  api: 'explorer',
  method: 'GET',
  paging: { kind: 'offset', maxLimit: 1000 },
  entriesAt: ['data'],
  ...e,
});

/** Token names of a contract inventory sit beside its entries, in `results`. */
const contractInventoryFields = {
  fill: { token_address: '$scope.token', token_name: '$results.token_name', token_symbol: '$results.token_symbol' },
};

/** Explorer #9, #21 (both paths), #23: who holds which ERC-721 token id. */
export const nft_inventory: DatasetDef = {
  name: 'nft_inventory',
  doc: 'ERC-721 ownership as of the run: the token ids a scoped holder owns (explorer #9), or the holders of a scoped contract’s tokens (#21, #23), optionally of one holder (#21, #9 with a token). One row per (token_address, token_id) per snapshot date.',
  kind: 'snapshot',
  endpoints: [
    listing({
      id: 'account_inventory',
      ref: '#9 GET /v1/accounts/{address_hash}/tokens/inventory',
      scope: 'address',
      path: '/v1/accounts/{address}/tokens/inventory',
      entryFields: { rename: { contract_address: 'token_address' }, fill: { holder_address: '$scope.address' } },
    }),
    listing({
      id: 'token_inventory',
      ref: '#21 GET /v1/tokens/{contract_address}/inventory',
      scope: 'token',
      path: '/v1/tokens/{token}/inventory',
      entryFields: contractInventoryFields,
    }),
    listing({
      id: 'erc721_inventory',
      ref: '#23 GET /v1/erc-721/{contract_address}/inventory',
      scope: 'token',
      path: '/v1/erc-721/{token}/inventory',
      entryFields: contractInventoryFields,
      alternate: true,
    }),
    listing({
      id: 'token_holder_inventory',
      ref: '#21 GET /v1/tokens/{contract_address}/inventory/{holder_address}',
      scope: 'token_holder',
      path: '/v1/tokens/{token}/inventory/{holder}',
      entryFields: contractInventoryFields,
    }),
    listing({
      id: 'account_token_inventory',
      ref: '#9 GET /v1/accounts/{address_hash}/tokens/inventory/{token_address}',
      scope: 'token_holder',
      path: '/v1/accounts/{holder}/tokens/inventory/{token}',
      entryFields: { rename: { contract_address: 'token_address' }, fill: { holder_address: '$scope.holder' } },
      alternate: true,
    }),
  ],
  naturalKey: ['token_address', 'token_id'],
  partition: 'snapshot_date',
  sortBy: ['token_address', 'token_id'],
  notes: [
    'A token id has one owner at a time, so the key is (token_address, token_id) whichever endpoint listed it; a later run of the same day replaces the row.',
    '#23 repeats #21 and #9-with-a-token repeats #21-with-a-holder: they are fetched only when the job names them in "endpoints".',
  ],
  columns: [
    { name: 'token_address', kind: 'address', nullable: false, doc: 'The ERC-721 contract, lower-case.' },
    { name: 'token_id', kind: 'text', pattern: TOKEN_ID, nullable: false, doc: 'Token id as exact decimal text (up to 2^256-1).' },
    { name: 'holder_address', kind: 'address', nullable: false, doc: 'Owner of the token at the time of the run, lower-case.' },
    { name: 'token_uri', kind: 'text', nullable: true, doc: 'Metadata URI; NULL when the token has none.' },
    { name: 'token_name', kind: 'text', nullable: true, doc: 'Collection name; NULL when it has none.' },
    { name: 'token_symbol', kind: 'text', nullable: true, doc: 'Collection symbol; NULL when it has none.' },
    { name: 'origin_endpoint', source: '$meta.endpoint', kind: 'text', nullable: false, doc: 'Which endpoint gave the row.' },
  ],
};
