/**
 * The single-machine lake is a DuckLake: `catalog.duckdb` holds the DuckLake's tables (src/ducklake/) beside
 * chainlake's runs, windows and watermarks, and the data files live under the lake directory with immutable
 * names (`main/<table>/network=<n>/<date column>=<value>/ducklake-<uuid>.parquet`). This module is what the
 * single-machine commit knows of it: the tables of the datasets it writes (created, or given the columns a
 * newer declaration adds) and the files each partition holds at the newest snapshot.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import type { CatalogDb, CatalogParam, CatalogRow } from '../ducklake/catalog-db.js';
import { DuckLakeError, duckDbQuery } from '../ducklake/catalog-db.js';
import { currentSnapshot, listAllColumns, listTables, tablePath, type LakeColumn, type LakeTable } from '../ducklake/reader.js';
import { ensureTable, tableMatches } from './lake-tables.js';
import type { TableShape } from './schema.js';

/** A Parquet file of a partition at the newest snapshot. */
export interface CurrentFile {
  dataFileId: number;
  /** Absolute path. */
  path: string;
  rows: number;
  bytes: number;
}

export interface LakeTableState {
  table: LakeTable;
  /** The table's columns at the newest snapshot, in order (their ids are the files' Parquet field ids). */
  columns: LakeColumn[];
  /** The table's directory (absolute, with a trailing `/`). */
  dir: string;
  /** Current files by partition (`partitionKey(network, value)`). */
  partitions: Map<string, CurrentFile[]>;
}

export const partitionKey = (network: string, value: string): string => `${network}\u0000${value}`;

/**
 * A catalog on the connection that has the lake's catalog attached and in use, joining the transaction the
 * caller has open: the single-machine commit writes chainlake's records and the DuckLake snapshot in ONE DuckDB
 * transaction (Catalog.transaction), so the DuckLake writer's own transactions must not begin another. One
 * writer at a time holds the lake (its lock), so the writer's retries on a lost race never happen here.
 */
export class JoinedDuckDbCatalog implements CatalogDb {
  readonly dialect = 'duckdb' as const;
  constructor(private readonly conn: DuckDBConnection) {}

  query(sql: string, params: readonly CatalogParam[] = []): Promise<CatalogRow[]> {
    return duckDbQuery(this.conn, sql, params);
  }

  transaction<T>(fn: (tx: CatalogDb) => Promise<T>): Promise<T> {
    return fn(this);
  }
}

/** The lake's tables and their current files, as of the newest snapshot. */
export class LakeState {
  constructor(
    readonly snapshotId: number,
    private readonly tables: ReadonlyMap<string, LakeTableState>,
  ) {}

  has(name: string): boolean {
    return this.tables.has(name);
  }

  table(name: string): LakeTableState {
    const t = this.tables.get(name);
    if (!t) throw new DuckLakeError(`table ${name} is not in the lake's catalog (it is created when a commit first writes it)`);
    return t;
  }

  /** The files a partition holds now (none for a new partition). */
  files(name: string, network: string, value: string): CurrentFile[] {
    return this.tables.get(name)?.partitions.get(partitionKey(network, value)) ?? [];
  }

  /** Every current file of a table (of one network, when given), absolute paths. */
  tableFiles(name: string, network?: string): string[] {
    const t = this.tables.get(name);
    if (!t) return [];
    return [...t.partitions].filter(([k]) => network === undefined || k.startsWith(`${network}\u0000`)).flatMap(([, files]) => files.map((f) => f.path));
  }

  all(): LakeTableState[] {
    return [...this.tables.values()];
  }
}

/**
 * Reads the lake's tables and their current files. With `ensure`, first creates the tables of those shapes that
 * the lake lacks (and adds columns a newer declaration has): call it inside the catalog's transaction then.
 * `dataPath` is the lake's directory as this process sees it (a moved lake still reads its files).
 */
export async function readLakeState(db: CatalogDb, dataPath: string, ensure: readonly TableShape[] = []): Promise<LakeState> {
  let snapshot = (await currentSnapshot(db)).snapshotId;
  let listed = await listTables(db, snapshot);
  let columns = await listAllColumns(db, snapshot);
  // Only a table that is missing, or lacks a column of this declaration, costs statements of its own.
  const missing = ensure.filter((shape) => {
    const table = listed.find((t) => t.name === shape.name && t.schema.name === 'main');
    return !table || !tableMatches(columns.get(table.tableId) ?? [], shape);
  });
  if (missing.length) {
    for (const shape of missing) await ensureTable(db, shape);
    snapshot = (await currentSnapshot(db)).snapshotId;
    listed = await listTables(db, snapshot);
    columns = await listAllColumns(db, snapshot);
  }
  const tables = new Map<string, LakeTableState>();
  const byId = new Map<number, LakeTableState>();
  for (const table of listed) {
    if (table.schema.name !== 'main') continue;
    const state: LakeTableState = {
      table,
      columns: columns.get(table.tableId) ?? [],
      dir: tablePath(dataPath, table),
      partitions: new Map(),
    };
    tables.set(table.name, state);
    byId.set(table.tableId, state);
  }
  const rows = await db.query(
    `SELECT d.table_id, d.data_file_id, d.path, d.path_is_relative, d.record_count, d.file_size_bytes, n.partition_value AS network, p.partition_value AS value,
            (SELECT count(*) FROM ducklake_delete_file x WHERE x.data_file_id = d.data_file_id AND x.end_snapshot IS NULL) AS deletes
     FROM ducklake_data_file d
     JOIN ducklake_file_partition_value n ON n.data_file_id = d.data_file_id AND n.partition_key_index = 0
     JOIN ducklake_file_partition_value p ON p.data_file_id = d.data_file_id AND p.partition_key_index = 1
     WHERE d.end_snapshot IS NULL
     ORDER BY d.data_file_id`,
  );
  for (const r of rows) {
    const state = byId.get(Number(r.table_id));
    if (!state) continue;
    if (Number(r.deletes) > 0) {
      // chainlake never deletes rows in place (a partition is replaced whole); another writer did.
      throw new DuckLakeError(
        `data file ${String(r.path)} of ${state.table.name} has a delete file: rows deleted by another DuckLake writer, which chainlake does not merge`,
      );
    }
    const key = partitionKey(String(r.network), String(r.value));
    const list = state.partitions.get(key) ?? [];
    list.push({
      dataFileId: Number(r.data_file_id),
      path: r.path_is_relative === false ? String(r.path) : state.dir + String(r.path),
      rows: Number(r.record_count),
      bytes: Number(r.file_size_bytes),
    });
    state.partitions.set(key, list);
  }
  return new LakeState(snapshot, tables);
}
