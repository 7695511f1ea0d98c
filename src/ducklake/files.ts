/**
 * Every file a DuckLake catalog names, whatever the snapshot: its data files, delete files and the files scheduled
 * for deletion, each at its full location under a data path. What decides that a stored file is an orphan
 * (`maintain --catalog` sweeps it) and that a named file is missing (`catalog rebuild --catalog` reports it): one
 * list for both, so a file one of them counts as the lake's the other does too.
 */
import type { CatalogDb } from './catalog-db.js';

export interface CatalogFile {
  /** data: a data file; delete: a delete file of `dataFileId`; scheduled: ended by an expiry, waiting to be deleted. */
  readonly kind: 'data' | 'delete' | 'scheduled';
  /** The data file (for a delete file: the data file whose rows it deletes). */
  readonly dataFileId: number | null;
  /** The table's name as the catalog last had it; null for a scheduled file (its table may be gone). */
  readonly table: string | null;
  readonly location: string;
  /** Rows of a data file, deleted rows of a delete file. */
  readonly rows: number | null;
  /** The first snapshot that lists the file, and the first that no longer does (null: the newest does). */
  readonly beginSnapshot: number | null;
  readonly endSnapshot: number | null;
  /** A data file's partition values, by partition key index (network, date for chainlake's tables). */
  readonly partition: readonly string[];
}

const join = (base: string, rel: string): string => (base.endsWith('/') ? base + rel : `${base}/${rel}`);
const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/** Where a catalog's tables keep their files: each table's name and folder by id, under the data path. */
interface TableFolders {
  readonly dataPath: string;
  readonly tableOf: ReadonlyMap<number, { name: string; path: string }>;
}

/** The files `db` names, with locations under `dataPath` (the catalog's data path as this machine reaches it). */
export async function catalogFiles(db: CatalogDb, dataPath: string): Promise<CatalogFile[]> {
  const folders = await tableFolders(db, dataPath);
  const partitions = await partitionValues(db);
  return [
    ...(await tableFiles(db, 'data', folders, partitions)),
    ...(await tableFiles(db, 'delete', folders, partitions)),
    ...(await scheduledFiles(db, dataPath)),
  ];
}

async function tableFolders(db: CatalogDb, dataPath: string): Promise<TableFolders> {
  const tables = await db.query(
    `SELECT t.table_id, t.table_name, s.path AS schema_path, t.path AS table_path FROM ducklake_table t JOIN ducklake_schema s ON s.schema_id = t.schema_id
     ORDER BY t.begin_snapshot`,
  );
  // A table renamed has a row per name: the newest wins.
  const tableOf = new Map(
    tables.map((t) => [Number(t.table_id), { name: String(t.table_name), path: join(join(dataPath, String(t.schema_path)), String(t.table_path)) }]),
  );
  return { dataPath, tableOf };
}

/** A file of table `tableId` at its full location: relative paths are under the table's folder (the data path for a table gone). */
function locate(folders: TableFolders, tableId: number, p: unknown, relative: unknown): string {
  return relative === false ? String(p) : join(folders.tableOf.get(tableId)?.path ?? folders.dataPath, String(p));
}

/** Each data file's partition values, by partition key index. */
async function partitionValues(db: CatalogDb): Promise<Map<number, string[]>> {
  const partitions = new Map<number, string[]>();
  for (const r of await db.query(`SELECT data_file_id, partition_key_index, partition_value FROM ducklake_file_partition_value`)) {
    const values = partitions.get(Number(r.data_file_id)) ?? [];
    values[Number(r.partition_key_index)] = String(r.partition_value);
    partitions.set(Number(r.data_file_id), values);
  }
  return partitions;
}

/** Where each kind of a table's files is listed, and which of its columns counts rows. */
const TABLE_FILES = {
  data: { table: 'ducklake_data_file', count: 'record_count', order: 'data_file_id' },
  delete: { table: 'ducklake_delete_file', count: 'delete_count', order: 'delete_file_id' },
} as const;

/** Data files, or delete files (each with its data file's partition values). */
async function tableFiles(
  db: CatalogDb,
  kind: keyof typeof TABLE_FILES,
  folders: TableFolders,
  partitions: ReadonlyMap<number, string[]>,
): Promise<CatalogFile[]> {
  const { table, count, order } = TABLE_FILES[kind];
  const rows = await db.query(
    `SELECT data_file_id, table_id, path, path_is_relative, ${count} AS file_rows, begin_snapshot, end_snapshot FROM ${table} ORDER BY ${order}`,
  );
  return rows.map((r) => {
    const tableId = Number(r.table_id);
    return {
      kind,
      dataFileId: num(r.data_file_id),
      table: folders.tableOf.get(tableId)?.name ?? null,
      location: locate(folders, tableId, r.path, r.path_is_relative),
      rows: num(r.file_rows),
      beginSnapshot: num(r.begin_snapshot),
      endSnapshot: num(r.end_snapshot),
      partition: partitions.get(Number(r.data_file_id)) ?? [],
    };
  });
}

/** Files an expiry ended, waiting to be deleted: their table may be gone, so relative paths are under the data path. */
async function scheduledFiles(db: CatalogDb, dataPath: string): Promise<CatalogFile[]> {
  const rows = await db.query(`SELECT data_file_id, path, path_is_relative FROM ducklake_files_scheduled_for_deletion`);
  return rows.map((r) => ({
    kind: 'scheduled',
    dataFileId: num(r.data_file_id),
    table: null,
    location: r.path_is_relative === false ? String(r.path) : join(dataPath, String(r.path)),
    rows: null,
    beginSnapshot: null,
    endSnapshot: null,
    partition: [],
  }));
}
