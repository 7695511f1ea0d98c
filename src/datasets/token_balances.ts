import { absenceColumns, type DatasetDef } from './dataset.js';

/** Explorer #20: the balance one holder has of one token. */
export const token_balances: DatasetDef = {
  name: 'token_balances',
  doc: 'Balance of scoped (token, holder) pairs as of the run (explorer #20). One row per pair per snapshot date.',
  kind: 'snapshot',
  endpoints: [
    {
      id: 'token_balance',
      api: 'explorer',
      ref: '#20 GET /v1/tokens/{contract_address}/balance/{address_hash}',
      method: 'GET',
      scope: 'token_holder',
      path: '/v1/tokens/{token}/balance/{holder}',
      paging: { kind: 'none' },
      entriesAt: ['data'],
      absentWhen: { httpStatus: [404], message: /token\b.*not found|not found.*token/i, emptyResults: true },
    },
  ],
  naturalKey: ['token_address', 'holder_address'],
  partition: 'snapshot_date',
  sortBy: ['token_address', 'holder_address'],
  columns: [
    { name: 'token_address', source: '$scope.token', kind: 'address', nullable: false, doc: 'The token contract, lower-case.' },
    { name: 'holder_address', source: '$scope.holder', kind: 'address', nullable: false, doc: 'The holder, lower-case.' },
    {
      name: 'balance',
      kind: 'amount',
      nullable: true,
      doc: 'Balance in the token’s smallest unit (ERC-721: number of tokens). NULL when >= 10^38; see balance_raw.',
    },
    ...absenceColumns('the API answers that it does not know the token'),
  ],
};
