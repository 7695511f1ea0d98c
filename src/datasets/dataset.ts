import type { ColumnDef } from './column.js';

export type Network = 'mainnet' | 'testnet';
export type Api = 'explorer' | 'finance';

/**
 * How the extract stage reaches a dataset's entries. Declarative on purpose: the generic window fetcher in
 * src/extract reads it, so adding a dataset never means writing another paging loop.
 */
export interface EndpointDef {
  api: Api;
  /** Spec row (explorer) or path (finance), for docs and `describe`. */
  ref: string;
  method: 'GET' | 'POST';
  /** Path template with `{placeholders}` filled from the scope, e.g. `/v1/accounts/{address}/transactions`. */
  path: string;
  /** Fixed query parameters. */
  query?: Record<string, string>;
  /** `offset` paging with `limit` up to `maxLimit`, or a single call. */
  paging: { kind: 'offset'; maxLimit: number } | { kind: 'none' };
  /** Names of the block-range query parameters, when the endpoint filters by block. */
  blockRange?: { start: string; end: string };
  /** Where the entries sit in the envelope's results, e.g. ['data']. */
  entriesAt: string[];
}

export type ScopeKind = 'address' | 'contract' | 'contract_topics' | 'transaction' | 'block' | 'pool' | 'pid' | 'token_holder' | 'none';

export interface DatasetDef {
  name: string;
  doc: string;
  /** chain datasets are windows over block ranges; snapshot datasets record state as of the run. */
  kind: 'chain' | 'snapshot';
  scope: ScopeKind;
  endpoints: EndpointDef[];
  /** Columns that identify one row; the lake keeps exactly one row per key. */
  naturalKey: string[];
  /** Hive partition column after `network`. */
  partition: 'block_date' | 'snapshot_date' | 'point_date';
  /** The column whose UTC date gives the partition (chain datasets), and rows are sorted by `sortBy`. */
  partitionFrom?: string;
  sortBy: string[];
  /** The block-number column that windows and watermarks refer to. */
  blockColumn?: string;
  columns: ColumnDef[];
}
