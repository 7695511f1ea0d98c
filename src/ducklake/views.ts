/**
 * Plain-DuckDB views over a DuckLake's current snapshot, for the single-machine lake: `catalog.duckdb` holds the
 * DuckLake tables and, beside them, one view per table that reads the current snapshot's Parquet files, so
 * `duckdb data/lake/catalog.duckdb` followed by `SELECT ... FROM transactions` works without the ducklake extension.
 * Refreshed inside the commit's transaction (CommitSpec.inTransaction), a view never shows a snapshot other than
 * the newest committed one. DuckDB only: a PostgreSQL catalog is read through `chainlake query` instead.
 */
import type { CatalogDb } from './catalog-db.js';
import { DuckLakeError } from './catalog-db.js';
import { ident } from './ddl.js';
import { currentSnapshot, listColumns, listDataFiles, listInlinedData, listTables, scanSql } from './reader.js';

/** Creates or replaces one view per table of the current snapshot (in the schema `main`), named like the table. */
export async function refreshViews(db: CatalogDb, dataPath: string): Promise<string[]> {
  if (db.dialect !== 'duckdb') throw new DuckLakeError('views over the current snapshot are made in a DuckDB-file catalog only');
  const snapshot = (await currentSnapshot(db)).snapshotId;
  const names: string[] = [];
  for (const table of await listTables(db, snapshot)) {
    if (table.schema.name !== 'main') continue;
    if (table.name.startsWith('ducklake_')) throw new DuckLakeError(`table ${table.name}: a view of that name would shadow the DuckLake catalog`);
    const columns = await listColumns(db, table.tableId, snapshot);
    const files = await listDataFiles(db, table, snapshot, dataPath);
    await db.query(`CREATE OR REPLACE VIEW ${ident(table.name)} AS ${scanSql(table, columns, files, snapshot, await listInlinedData(db, table))}`);
    names.push(table.name);
  }
  return names;
}
