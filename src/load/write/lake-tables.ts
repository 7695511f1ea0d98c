/**
 * A dataset as a DuckLake table: the dataset's file columns, then `network` and its partition column (a date),
 * partitioned by both (identity). On a single-machine lake those two are Hive folders; in a DuckLake they are
 * columns of every file, so a file read alone still says where its rows belong.
 */
import type { CatalogDb } from '../../ducklake/catalog-db.js';
import { DuckLakeError } from '../../ducklake/catalog-db.js';
import { currentSnapshot, listColumns, listTables } from '../../ducklake/reader.js';
import { ducklakeTypeTree, type TypeTree } from '../../ducklake/types.js';
import type { LakeColumn } from '../../ducklake/reader.js';
import { ChainlakeError } from '../../errors.js';
import { addColumns, createTable, type ColumnSpec } from '../../ducklake/writer.js';
import type { TableShape } from '../schema.js';

/** A column as the catalog has it and as a declaration types it: the same type, nested types included. */
function sameType(have: LakeColumn, want: TypeTree): boolean {
  return have.type === want.type && have.children.length === want.children.length && have.children.every((h, i) => sameType(h, want.children[i]!));
}

/** Whether a table's columns are already those of `shape` (names and types): then there is nothing to ensure. */
export function tableMatches(have: readonly LakeColumn[], shape: TableShape): boolean {
  return tableColumns(shape).every((c) => {
    const old = have.find((h) => h.name === c.name);
    return old !== undefined && sameType(old, ducklakeTypeTree(c.type, `table ${shape.name}, column ${c.name}`));
  });
}

/** The table's columns: the shape's, then `network` and the partition column. */
export function tableColumns(shape: TableShape): ColumnSpec[] {
  return [...shape.columns.map((c) => ({ name: c.name, type: c.type })), { name: 'network', type: 'VARCHAR' }, { name: shape.partition, type: 'DATE' }];
}

/**
 * Creates the dataset's table unless the catalog has it, and adds the columns a newer declaration has and the
 * table lacks (an upgrade of chainlake), so that no fetched value is left out of the files. A column whose type
 * changed is refused: its old files cannot be read as the new type. One committer at a time (the lease).
 */
export async function ensureTable(catalog: CatalogDb, shape: TableShape): Promise<void> {
  const snapshot = await currentSnapshot(catalog);
  const table = (await listTables(catalog, snapshot.snapshotId)).find((t) => t.name === shape.name && t.schema.name === 'main');
  if (table) {
    const have = await listColumns(catalog, table.tableId, snapshot.snapshotId);
    const missing: ColumnSpec[] = [];
    for (const c of tableColumns(shape)) {
      const old = have.find((h) => h.name === c.name);
      if (!old) missing.push(c);
      else if (!sameType(old, ducklakeTypeTree(c.type, `table ${shape.name}, column ${c.name}`))) {
        throw new ChainlakeError(`the lake's table ${shape.name} has column ${c.name} as ${old.type}; this chainlake declares it ${c.type}`, {
          hint: 'run the chainlake version that wrote the lake, or export into a new catalog',
        });
      }
    }
    if (missing.length)
      await addColumns(catalog, { tableName: shape.name, columns: missing, author: 'chainlake', message: `add ${missing.map((c) => c.name).join(', ')}` });
    return;
  }
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
