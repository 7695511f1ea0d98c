/**
 * The `verifications` ledger table: one row per check of one window (or of one dataset, for checks that are not
 * about a window) per `chainlake verify`. Defined once, in the SQL both DuckDB and PostgreSQL accept, and created
 * by both kinds of lake's setup (load/catalog.ts for a local catalog, distributed/control-plane.ts for the
 * control plane's schema).
 */
import type { CatalogDb } from '../../ducklake/catalog-db.js';
import { ledgerTableName } from './schema.js';

/** The table's name under `schema` (`''`: the catalog's default schema, as a local lake has it). */
export const verificationsTable = (schema: string): string => ledgerTableName(schema, 'verifications');

/** The table's DDL under `schema`. */
export function verificationsDdl(schema: string): string {
  return `CREATE TABLE IF NOT EXISTS ${verificationsTable(schema)} (verify_id VARCHAR, check_name VARCHAR, dataset VARCHAR, network VARCHAR,
     scope VARCHAR, from_block BIGINT, to_block BIGINT, status VARCHAR, lake_count BIGINT, api_count BIGINT, detail VARCHAR,
     verified_at TIMESTAMPTZ)`;
}

/** Creates the table when missing. */
export async function ensureVerificationsTable(db: CatalogDb, schema: string): Promise<void> {
  await db.query(verificationsDdl(schema));
}

/** What a check found for one window (or dataset: `scope`, `fromBlock` and `toBlock` null). */
export interface VerificationRow {
  check: string;
  dataset: string;
  network: string;
  scope: string | null;
  fromBlock: number | null;
  toBlock: number | null;
  /** held: checked and true; differs: checked and not true; not-checked: could not be checked (detail says why). */
  status: 'held' | 'differs' | 'not-checked';
  lakeCount: number | null;
  apiCount: number | null;
  detail: string;
}

/** Records one verify run's rows, in one transaction. */
export async function recordVerifications(db: CatalogDb, schema: string, verifyId: string, at: Date, rows: readonly VerificationRow[]): Promise<void> {
  await ensureVerificationsTable(db, schema);
  await db.transaction(async (tx) => {
    for (const r of rows) {
      await tx.query(
        `INSERT INTO ${verificationsTable(schema)} (verify_id, check_name, dataset, network, scope, from_block, to_block, status, lake_count, api_count, detail, verified_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, CAST($12 AS TIMESTAMPTZ))`,
        [verifyId, r.check, r.dataset, r.network, r.scope, r.fromBlock, r.toBlock, r.status, r.lakeCount, r.apiCount, r.detail, at.toISOString()],
      );
    }
  });
}
