/**
 * The `requests` ledger table: one row per call a window made (its retries are its attempts), written with the
 * window's record in the same catalog transaction, on both kinds of lake. Defined once here, in the SQL both
 * DuckDB and PostgreSQL accept (see src/ducklake/catalog-db.ts), and read and written through `CatalogDb`. A
 * lake's setup calls `requestsLedgerDdl` (load/catalog.ts for `catalog.duckdb`, distributed/control-plane.ts for
 * PostgreSQL's control schema).
 */
import type { CatalogDb, CatalogValue } from '../../ducklake/catalog-db.js';
import type { RequestRecord } from '../../extract/request-log.js';
import { ledgerTableName } from './schema.js';

export const REQUESTS_TABLE = 'requests';

/** The table's columns, in order, with their types (one text for both engines) and what each holds. */
export const REQUESTS_COLUMNS: readonly { name: string; type: string; doc: string }[] = [
  { name: 'run_id', type: 'VARCHAR', doc: 'The run whose window made the call.' },
  { name: 'window_id', type: 'VARCHAR', doc: "The window (the windows table's window_id): dataset/network/scope/range." },
  { name: 'seq', type: 'INTEGER', doc: 'Order of the call within its window (0 first).' },
  { name: 'endpoint', type: 'VARCHAR', doc: 'The endpoint id, as `chainlake describe --endpoints` lists it.' },
  { name: 'method', type: 'VARCHAR', doc: 'GET or POST.' },
  { name: 'path', type: 'VARCHAR', doc: "The URL's path below the API's host." },
  {
    name: 'params',
    type: 'VARCHAR',
    doc: "The query parameters (a POST's body as `body`), JSON text; never the API key (sent as a header) nor any parameter named like a secret.",
  },
  { name: 'http_status', type: 'INTEGER', doc: "The last attempt's HTTP status; NULL when no response came." },
  { name: 'attempts', type: 'INTEGER', doc: 'Attempts sent (retries included); each counts against the quota and in the run report.' },
  { name: 'rows', type: 'BIGINT', doc: 'Entries the response held; NULL when the call failed.' },
  { name: 'bytes', type: 'BIGINT', doc: "The last response body's size." },
  { name: 'body_sha256', type: 'VARCHAR', doc: "sha256 (hex) of the last response's body as received." },
  { name: 'sent_at', type: 'TIMESTAMPTZ', doc: "When the call's first attempt was sent (UTC)." },
  { name: 'error', type: 'VARCHAR', doc: 'Why the call failed, when it did.' },
];

/** The table's DDL; `schema` is the schema it lives in (none: the database's default, as in `catalog.duckdb`). */
export function requestsLedgerDdl(schema?: string): string[] {
  return [`CREATE TABLE IF NOT EXISTS ${qualified(schema)} (${REQUESTS_COLUMNS.map((c) => `${c.name} ${c.type}`).join(', ')})`];
}

const qualified = (schema: string | undefined): string => ledgerTableName(schema, REQUESTS_TABLE);

/** A window's calls, as the ledger records them. */
export interface WindowRequests {
  runId: string;
  windowId: string;
  calls: readonly RequestRecord[];
}

/** Records windows' calls, in one statement (inside the caller's transaction: the commit that records the windows). */
export async function insertRequests(db: CatalogDb, windows: readonly WindowRequests[], schema?: string): Promise<void> {
  const rows: CatalogValue[][] = [];
  for (const w of windows) {
    w.calls.forEach((c, seq) =>
      rows.push([w.runId, w.windowId, seq, c.endpoint, c.method, c.path, c.params, c.httpStatus, c.attempts, c.rows, c.bytes, c.bodySha256, c.sentAt, c.error]),
    );
  }
  if (rows.length === 0) return;
  const columns = REQUESTS_COLUMNS.map((_, i) => rows.map((r) => r[i] ?? null));
  // Both engines zip unnests of equal length; each column is bound as one array (a VALUES tuple per row binds slowly).
  const unnested = REQUESTS_COLUMNS.map((c, i) => `unnest(CAST($${i + 1} AS ${c.type === 'TIMESTAMPTZ' ? 'VARCHAR' : c.type}[])) AS ${c.name}`);
  const select = REQUESTS_COLUMNS.map((c) => (c.type === 'TIMESTAMPTZ' ? `CAST(${c.name} AS TIMESTAMPTZ)` : c.name));
  await db.query(
    `INSERT INTO ${qualified(schema)} (${REQUESTS_COLUMNS.map((c) => c.name).join(', ')}) SELECT ${select.join(', ')} FROM (SELECT ${unnested.join(', ')}) AS u`,
    columns,
  );
}

/** A window's calls as text, for a ledger that carries them until its commit (the distributed windows' `request_log`). */
export const encodeCalls = (calls: readonly RequestRecord[]): string => JSON.stringify(calls);

export function decodeCalls(text: unknown): RequestRecord[] {
  if (typeof text === 'string' && text !== '') return JSON.parse(text) as RequestRecord[];
  // PostgreSQL's driver gives JSON columns parsed.
  return Array.isArray(text) ? (text as RequestRecord[]) : [];
}
