import { absenceColumns, type DatasetDef } from './dataset.js';

/** Explorer #19: total supply of a token. */
export const token_supply: DatasetDef = {
  name: 'token_supply',
  doc: 'Total supply of scoped token contracts as of the run (explorer #19). One row per token per snapshot date.',
  kind: 'snapshot',
  endpoints: [
    {
      id: 'token_total_supply',
      api: 'explorer',
      ref: '#19 GET /v1/tokens/{contract_address}/total-supply',
      method: 'GET',
      scope: 'token',
      path: '/v1/tokens/{token}/total-supply',
      paging: { kind: 'none' },
      entriesAt: ['data'],
      absentWhen: { httpStatus: [404], message: /token\b.*not found|not found.*token/i, emptyResults: true },
    },
  ],
  naturalKey: ['token_address'],
  partition: 'snapshot_date',
  sortBy: ['token_address'],
  columns: [
    { name: 'token_address', source: '$scope.token', kind: 'address', nullable: false, doc: 'The token contract, lower-case.' },
    {
      name: 'total_supply',
      kind: 'amount',
      nullable: true,
      doc: 'Total supply in the token’s smallest unit (ERC-721: number of tokens). NULL when >= 10^38; see total_supply_raw.',
    },
    ...absenceColumns('the API answers that it does not know the token'),
  ],
};
