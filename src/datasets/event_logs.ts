import type { DatasetDef } from './dataset.js';

/** Explorer #18: event logs of a contract filtered by topics. */
export const event_logs: DatasetDef = {
  name: 'event_logs',
  doc: 'Event logs of a scoped contract, optionally filtered by topics (explorer #18): topic_0 (required by the spec, optional on the real service: without topics, all the contract’s logs); topic_1..3 combine with the scope’s operand (and/or). One row per (transaction_hash, log_index).',
  kind: 'chain',
  endpoints: [
    {
      id: 'event_logs',
      api: 'explorer',
      ref: '#18 GET /v1/event-logs',
      method: 'GET',
      scope: 'contract_topics',
      path: '/v1/event-logs',
      scopeQuery: { address: 'contract', topic_0: 'topic0', topic_1: 'topic1', topic_2: 'topic2', topic_3: 'topic3', type: 'type', operand: 'operand' },
      paging: { kind: 'offset', maxLimit: 1000 },
      blockRange: { start: 'start_block', end: 'end_block' },
      entriesAt: ['data'],
    },
  ],
  naturalKey: ['transaction_hash', 'log_index'],
  partition: 'block_date',
  partitionFrom: 'timestamp',
  sortBy: ['timestamp', 'transaction_index', 'log_index'],
  notes: [
    'A contract without topics lists all its logs (the real service; the spec requires topic_0, and a service that does refuses the window). The same log reached by two scopes (all logs, and one topic) is one row: the key is (transaction_hash, log_index).',
    'Entries carry no block number. Windows still are block ranges: the endpoint filters by start_block/end_block, so the job range, the pinned head, splitting over the result-window cap and watermarks work as for other chain datasets.',
    'Partitioned by block_date, the UTC date of the log’s timestamp (the block time); rows are sorted by timestamp, and the files record no block bounds.',
  ],
  columns: [
    { name: 'timestamp', kind: 'timestamp', nullable: false, doc: 'UTC time of the block holding the log.' },
    { name: 'transaction_hash', kind: 'hash', nullable: false, doc: 'Transaction that emitted the log, lower-case.' },
    { name: 'transaction_index', kind: 'bigint', nullable: true, doc: 'Index of that transaction within its block.' },
    { name: 'log_index', kind: 'bigint', nullable: false, doc: 'Index of the log within its block.' },
    { name: 'address', kind: 'address', nullable: false, doc: 'Contract that emitted the log, lower-case.' },
    { name: 'topics_count', kind: 'bigint', nullable: true, doc: 'Number of topics of the log.' },
    { name: 'topic_0', kind: 'hash', nullable: true, doc: 'Event signature topic, lower-case; NULL for anonymous events.' },
    { name: 'topic_1', kind: 'hash', nullable: true, doc: 'First indexed argument; NULL when unused.' },
    { name: 'topic_2', kind: 'hash', nullable: true, doc: 'Second indexed argument; NULL when unused.' },
    { name: 'topic_3', kind: 'hash', nullable: true, doc: 'Third indexed argument; NULL when unused.' },
    { name: 'data', kind: 'hex', nullable: true, doc: 'Non-indexed data of the log, hex, lower-case.' },
    { name: 'method', kind: 'text', nullable: true, doc: 'Method (selector or name) of the call that emitted the log, as the API gives it.' },
    { name: 'log_name', kind: 'text', nullable: true, doc: 'Event name; NULL for unnamed logs.' },
    { name: 'log_abi', kind: 'text', nullable: true, doc: 'Event signature text as the API gives it; NULL for unnamed logs.' },
    { name: 'address_type', kind: 'text', nullable: true, doc: 'Kind of the emitting address, as the API gives it.' },
    { name: 'address_extra', kind: 'text', nullable: true, doc: 'Extra label of the emitting address (e.g. a token name).' },
  ],
};
