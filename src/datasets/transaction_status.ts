import { absenceColumns, type DatasetDef } from './dataset.js';

/** Explorer #11 and #12: execution status and receipt availability of a transaction. */
export const transaction_status: DatasetDef = {
  name: 'transaction_status',
  doc: 'Status checks of scoped transactions as of the run: execution status with its error description (explorer #11) and receipt availability (#12). One row per (transaction_hash, status_kind) per snapshot date.',
  kind: 'snapshot',
  endpoints: [
    {
      id: 'transaction_status',
      api: 'explorer',
      ref: '#11 GET /v1/transactions/{transaction_hash}/transaction-status',
      method: 'GET',
      scope: 'transaction',
      path: '/v1/transactions/{transaction}/transaction-status',
      paging: { kind: 'none' },
      entriesAt: ['data'],
      absentWhen: { httpStatus: [404], message: /transaction\b.*not found|not found.*transaction/i, emptyResults: true },
    },
    {
      id: 'receipt_status',
      api: 'explorer',
      ref: '#12 GET /v1/transactions/{transaction_hash}/receipt-status',
      method: 'GET',
      scope: 'transaction',
      path: '/v1/transactions/{transaction}/receipt-status',
      paging: { kind: 'none' },
      entriesAt: ['data'],
      absentWhen: { httpStatus: [404], message: /transaction\b.*not found|not found.*transaction/i, emptyResults: true },
    },
  ],
  naturalKey: ['transaction_hash', 'status_kind'],
  partition: 'snapshot_date',
  sortBy: ['transaction_hash', 'status_kind'],
  notes: ['The two endpoints answer different questions, so each gives its own row, told apart by status_kind.'],
  columns: [
    { name: 'transaction_hash', source: '$scope.transaction', kind: 'hash', nullable: false, doc: 'The transaction, lower-case.' },
    {
      name: 'status_kind',
      source: '$meta.endpoint',
      kind: 'text',
      nullable: false,
      doc: 'transaction_status (#11: did execution succeed) or receipt_status (#12: is the receipt available; Byzantium and later only).',
    },
    {
      name: 'status',
      kind: 'bool',
      nullable: true,
      doc: 'transaction_status: true success, false error. receipt_status: true receipt available, false not available although the transaction exists.',
    },
    { name: 'description', kind: 'text', nullable: true, doc: 'Text about the error when execution failed (transaction_status only).' },
    ...absenceColumns('the API answers that it does not know the transaction'),
  ],
};
