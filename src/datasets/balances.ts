import type { DatasetDef } from './dataset.js';

/** Explorer #1: native balances, POSTed in batches of 1 to 20 addresses. */
export const balances: DatasetDef = {
  name: 'balances',
  doc: 'Native-coin balances of scoped addresses as of the run (explorer #1, POST, up to 20 addresses per call). One row per address per snapshot date; nightly runs build the history the API does not keep.',
  kind: 'snapshot',
  endpoints: [
    {
      id: 'balances',
      api: 'explorer',
      ref: '#1 POST /v1/accounts/balance',
      method: 'POST',
      scope: 'address_batch',
      path: '/v1/accounts/balance',
      body: { addresses: { from: 'addresses', list: true } },
      paging: { kind: 'none' },
      entriesAt: ['data'],
    },
  ],
  naturalKey: ['address'],
  partition: 'snapshot_date',
  sortBy: ['address'],
  notes: [
    'The job’s addresses are sent in batches of at most 20 (the API’s bound), one window per batch.',
    'A later run of the same day replaces that day’s row.',
  ],
  columns: [
    { name: 'address', kind: 'address', nullable: false, doc: 'Account address, lower-case.' },
    { name: 'balance', kind: 'amount', nullable: false, doc: 'Native-coin balance in wei at the time of the run. NULL when >= 10^38; see balance_raw.' },
  ],
};
