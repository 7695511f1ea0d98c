/**
 * The ledger's `declared_tables` (schema.ts), for both kinds of lake: the tables beyond the registry that commits
 * declared (decoded events, reconciled balances), so that whatever reads or rewrites the lake later (views,
 * compaction, a rebuild) knows their natural key, order and partition without the job that declared them. A commit
 * declares its tables in its own transaction.
 */
import { lakeShapes, type DeclaredTable, type TableShape } from '../schema.js';
import { ledgerTableName, sqlType } from './schema.js';
import type { Ledger } from './windows.js';

const tableOf = (ledger: Ledger): string => ledgerTableName(ledger.schema, 'declared_tables');

/** Declares `tables` (a table declared again takes its new declaration: a decode spec's newer columns). */
export async function declareTables(ledger: Ledger, tables: readonly DeclaredTable[]): Promise<void> {
  for (const t of tables) {
    await ledger.db.query(
      `INSERT INTO ${tableOf(ledger)} (name, declaration) VALUES ($1, CAST($2 AS ${sqlType(ledger.db.dialect, 'json')}))
       ON CONFLICT (name) DO UPDATE SET declaration = EXCLUDED.declaration`,
      [t.shape.name, JSON.stringify(t)],
    );
  }
}

/** Every declared table, by name. */
export async function readDeclaredTables(ledger: Ledger): Promise<DeclaredTable[]> {
  const rows = await ledger.db.query(`SELECT CAST(declaration AS VARCHAR) AS d FROM ${tableOf(ledger)} ORDER BY name`);
  return rows.map((r) => JSON.parse(String(r.d)) as DeclaredTable);
}

/** Every table the lake can hold: the registry's datasets, `_rejects` and the declared tables. */
export async function lakeTableShapes(ledger: Ledger): Promise<TableShape[]> {
  return [...lakeShapes(), ...(await readDeclaredTables(ledger)).map((d) => d.shape)];
}

/**
 * The statements that move a local catalog's declarations from where catalogs before the one ledger kept them
 * (lake_meta, `table:<name>`) into `declared_tables`; a declaration already there is kept.
 */
export const LEGACY_DECLARATIONS = [
  `INSERT INTO declared_tables (name, declaration) SELECT substr(key, 7), CAST(value AS JSON) FROM lake_meta WHERE key LIKE 'table:%' ON CONFLICT (name) DO NOTHING`,
  `DELETE FROM lake_meta WHERE key LIKE 'table:%'`,
];
