import type { ColumnDef } from './column.js';

export type Network = 'mainnet' | 'testnet';
export type Api = 'explorer' | 'finance';

/**
 * What one call of an endpoint is about, i.e. which values fill its path, query or body. Each kind is fed by
 * one key of a job's dataset spec (see src/pipeline/job.ts):
 *
 * | kind            | scope values                                    | job key                         |
 * |-----------------|-------------------------------------------------|---------------------------------|
 * | address         | address                                         | addresses                       |
 * | address_batch   | addresses (comma list of 1..20)                 | addresses                       |
 * | transaction     | transaction                                     | transactions                    |
 * | contract        | contract                                        | contracts                       |
 * | contract_topics | contract, topic0, topic1..3?, type?, operand?   | contracts (+ topics)            |
 * | token           | token                                           | tokens                          |
 * | token_holder    | token, holder                                   | pairs                           |
 * | block           | block                                           | blocks                          |
 * | block_or_latest | block? (absent: the API's latest)               | blocks (optional)               |
 * | pool            | pool                                            | pools                           |
 * | pid             | pid                                             | pids                            |
 * | chart           | unit, unit_count, unit_multiplier               | charts                          |
 * | none            | (nothing)                                       | —                               |
 */
export type ScopeKind =
  | 'address'
  | 'address_batch'
  | 'transaction'
  | 'contract'
  | 'contract_topics'
  | 'token'
  | 'token_holder'
  | 'block'
  | 'block_or_latest'
  | 'pool'
  | 'pid'
  | 'chart'
  | 'none';

/**
 * How the extract stage reaches a dataset's entries. Declarative on purpose: the generic window fetcher in
 * src/extract reads it, so adding a dataset never means writing another paging loop.
 */
export interface EndpointDef {
  /** Stable short name: window ids, `$meta.endpoint`, the job's `endpoints` filter and `describe` use it. */
  id: string;
  api: Api;
  /** Spec row (explorer) or path (finance), for docs and `describe`. */
  ref: string;
  method: 'GET' | 'POST';
  /** What one call is about; the job's spec for the dataset supplies the scopes of this kind. */
  scope: ScopeKind;
  /** Path template with `{placeholders}` filled from the scope, e.g. `/v1/accounts/{address}/transactions`. */
  path: string;
  /** Fixed query parameters. */
  query?: Record<string, string>;
  /** Query parameters filled from scope values (`param -> scope key`); absent scope values are left out. */
  scopeQuery?: Record<string, string>;
  /** POST only: the JSON body, each field a scope value (`field -> scope key`); `list` splits a comma list. */
  body?: Record<string, { from: string; list?: boolean }>;
  /**
   * `offset` paging with `limit` up to `maxLimit`; `limit`: one call with `limit=maxLimit` and no offset (the
   * endpoint cannot page, so a `count` above it is an error); `none`: a single call.
   */
  paging: { kind: 'offset'; maxLimit: number } | { kind: 'limit'; maxLimit: number } | { kind: 'none' };
  /** Names of the block-range query parameters, when the endpoint filters by block: such windows have a range. */
  blockRange?: { start: string; end: string };
  /**
   * Block-ranged endpoints: the columns each scope value filters the listing on (`scope key -> columns`): a row
   * is the scope's when, for every key, one of its columns holds the value (an address as sender, receiver or
   * created contract). What a window's listing holds in the lake, so that a window fetched again replaces it
   * (scope-rows.ts).
   */
  scopeColumns?: Record<string, string[]>;
  /**
   * Endpoints filtering by event topics (explorer #18): `scope key -> column` of topic 0 to 3, in that order. A row
   * is the scope's as the API decides: topic 0 equal when given; with the scope's `type` `combine` (the default
   * when another topic is given) the other given topics combined by its `operand` (`and` by default).
   */
  scopeTopics?: readonly (readonly [string, string])[];
  /** Where the entries sit in the results (explorer `results`, finance envelope), e.g. ['data']. */
  entriesAt: string[];
  /** Where the total count sits, for offset paging; default ['count']. */
  countAt?: string[];
  /** Testnet serves this endpoint from the alternate host (spec: internal transactions by hash, #13). */
  testnetAltHost?: boolean;
  /** Not fetched unless the job names it in the dataset's `endpoints` (it repeats what a default endpoint gives). */
  alternate?: boolean;
  /**
   * How this endpoint's entries map onto the dataset's fields, where endpoints of one dataset name things
   * differently: `rename` (API field -> dataset field) and `fill` (dataset field -> `$scope.<key>` or
   * `$results.<path>`, used when the entry lacks the field). Applied by the transform; rejects keep the API's entry.
   */
  entryFields?: EntryFields;
  /** Constant values a column can read as `$meta.<key>`, e.g. the standard of a holdings group. */
  meta?: Record<string, string>;
  /**
   * A terminal API failure that is a fact about the scope, not an error (an unverified contract, an unknown
   * transaction or token): the window
   * records one entry `{}` with `$meta.found` false and `$meta.api_message` the API's message.
   */
  absentWhen?: {
    httpStatus: number[];
    message: RegExp;
    /**
     * A success envelope with nothing in it (`results` null, `{}` or `[]`, or an empty record where the entries
     * sit) is that fact too; its message is kept (the real explorer's unverified contract: HTTP 200, `{}`).
     */
    emptyResults?: boolean;
  };
}

export interface EntryFields {
  rename?: Record<string, string>;
  fill?: Record<string, string>;
}

/**
 * Entries without a unique id (an ERC-20 transfer has no log index) are numbered: the ordinal column counts
 * entries identical in `over` within their group, so the natural key `over + ordinal` is unique and stable
 * whichever scope listed the entry. The API lists a group's entries contiguously (newest first); the
 * transform checks that order and fails the window rather than number a group twice. The ordinal itself lands
 * in the column whose source is `$ordinal` (0 for the first of identical entries).
 */
export interface OrdinalDef {
  /** Columns whose equal values make entries identical (canonical values: case does not matter). */
  over: string[];
  /** Columns that identify a group (one transaction) and must be contiguous and monotonic in the listing. */
  groupBy: string[];
}

export interface DatasetDef {
  name: string;
  doc: string;
  /**
   * chain: chain facts, partitioned by block date; snapshot: state as of the run, partitioned by the run's
   * date; series: time series points, partitioned by the point's date.
   */
  kind: 'chain' | 'snapshot' | 'series';
  endpoints: EndpointDef[];
  /** Columns that identify one row within a partition; the lake keeps exactly one row per key (newest wins). */
  naturalKey: string[];
  /** Hive partition column after `network`. */
  partition: 'block_date' | 'snapshot_date' | 'point_date';
  /** The timestamp column whose UTC date gives the partition (block_date and point_date datasets). */
  partitionFrom?: string;
  sortBy: string[];
  /** The block-number column that windows and watermarks refer to. */
  blockColumn?: string;
  /**
   * Rows carrying their block's time but no block number (event_logs): the column holding that time. A window
   * fetched again replaces the rows between the times of its first and last block (asked of the block endpoint),
   * as a window of a dataset with `blockColumn` replaces those of its block range (scope-rows.ts).
   */
  blockTimeColumn?: string;
  ordinal?: OrdinalDef;
  /** Why the dataset is windowed, keyed and partitioned as it is, where that is not obvious; shown by describe. */
  notes?: string[];
  columns: ColumnDef[];
}

/** Scope kinds a dataset can be asked for, in declaration order. */
export function scopeKindsOf(def: DatasetDef): ScopeKind[] {
  return [...new Set(def.endpoints.map((e) => e.scope))];
}

/**
 * The columns of a point lookup that records absences (EndpointDef.absentWhen): `found` is false, `api_message`
 * holds the API's words and the record's columns are NULL when `when`.
 */
export function absenceColumns(when: string): ColumnDef[] {
  return [
    { name: 'found', source: '$meta.found', kind: 'bool', nullable: false, doc: `false when ${when} (then the record columns are NULL).` },
    { name: 'api_message', source: '$meta.api_message', kind: 'text', nullable: true, doc: 'The API’s message when found is false; NULL otherwise.' },
  ];
}
