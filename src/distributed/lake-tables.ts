/**
 * A dataset as a DuckLake table: the dataset's file columns, then `network` and its partition column (a date),
 * partitioned by both (identity). On a single-machine lake those two are Hive folders; in a DuckLake they are
 * columns of every file, so a file read alone still says where its rows belong.
 */
import type { CatalogDb } from '../ducklake/catalog-db.js';
import { DuckLakeError } from '../ducklake/catalog-db.js';
import { currentSnapshot, listTables } from '../ducklake/reader.js';
import { createTable, type ColumnSpec } from '../ducklake/writer.js';
import type { TableShape } from '../load/schema.js';

/** The table's columns: the shape's, then `network` and the partition column. */
export function tableColumns(shape: TableShape): ColumnSpec[] {
  return [...shape.columns.map((c) => ({ name: c.name, type: c.type })), { name: 'network', type: 'VARCHAR' }, { name: shape.partition, type: 'DATE' }];
}

/** Creates the dataset's table unless the catalog has it. One committer at a time creates tables (the lease). */
export async function ensureTable(catalog: CatalogDb, shape: TableShape): Promise<void> {
  const snapshot = await currentSnapshot(catalog);
  if ((await listTables(catalog, snapshot.snapshotId)).some((t) => t.name === shape.name && t.schema.name === 'main')) return;
  try {
    await createTable(catalog, {
      name: shape.name,
      columns: tableColumns(shape),
      partitionBy: ['network', shape.partition],
      author: 'chainlake',
      message: `create ${shape.name}`,
    });
  } catch (error) {
    // A committer that lost its lease between the check and the create: the table is there, which is all we need.
    if (!(error instanceof DuckLakeError && /already exists/.test(error.message))) throw error;
  }
}
