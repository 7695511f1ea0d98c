/**
 * A distributed lake's current rows of one table and network, as the committer's merge reads them (mergeTable's
 * lake side, load/write/lake-partitions.ts): the partitions' data files (copied to this machine from an object
 * store) and the rows other DuckLake writers inlined into the catalog. The single machine's counterpart is
 * LakeState.partitionsOf (load/write/lake-state.ts), which reads a catalog.duckdb.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import type { CatalogDb } from '../ducklake/catalog-db.js';
import { currentSnapshot, findTable, inlinedRowsFor, listColumns, listDataFiles, scanSql } from '../ducklake/reader.js';
import type { RejectFiles } from '../decode/rejects.js';
import { STAGED_PARTITION, type TableShape } from '../load/schema.js';
import { ident, literal } from '../load/sql.js';
import type { LakePartitions } from '../load/write/lake-partitions.js';
import { fileBlockSpans } from '../load/write/replace.js';
import type { Store } from './store.js';

/** The catalog and the store a lake's rows are read from. */
export interface LakeDeps {
  catalog: CatalogDb;
  store: Store;
}

/** The `_rejects` files of `rejects` (one network's, opened by lakeRows) on this machine, and each one's partition. */
export async function rejectFilesOf(deps: LakeDeps, rejects: LakeRows): Promise<RejectFiles> {
  const { catalog, store } = deps;
  const snapshot = await currentSnapshot(catalog);
  const all = await listDataFiles(catalog, rejects.table, snapshot.snapshotId, store.localDataPath);
  const day = new Map<string, string>();
  for (const [partition, ids] of rejects.current)
    for (const f of all) {
      if (!ids.includes(f.dataFileId)) continue;
      await store.localCopy(store.lakeLocation(f.path));
      day.set(f.path, partition);
    }
  return { files: [...day.keys()], partitionOf: (f) => day.get(f) };
}

/** A table's current rows of one network as the catalog holds them (files and inlined rows), partition by partition. */
export interface LakeRows extends LakePartitions {
  table: Awaited<ReturnType<typeof findTable>>;
  columns: Awaited<ReturnType<typeof listColumns>>;
  /** Current data file ids by partition value. */
  current: Map<string, number[]>;
  release(): Promise<void>;
}

/**
 * Opens `shape`'s current rows of `network` at the catalog's current snapshot, for queries on `conn` (or, with
 * `temporary` false, on any connection of the engine: copies of inlined rows are then plain tables).
 */
export async function lakeRows(
  deps: LakeDeps,
  shape: TableShape,
  network: string,
  conn: DuckDBConnection,
  temporary: boolean,
  prefix: string,
): Promise<LakeRows> {
  const { catalog, store } = deps;
  const snapshot = await currentSnapshot(catalog);
  const table = await findTable(catalog, snapshot.snapshotId, shape.name);
  const columns = await listColumns(catalog, table.tableId, snapshot.snapshotId);
  const current = await partitionFiles(catalog, table.tableId, snapshot.snapshotId, network);
  // Paths resolved against this machine's copy of the lake (the store itself where it is a directory).
  const all = await listDataFiles(catalog, table, snapshot.snapshotId, store.localDataPath);
  // The commit ends the replaced partitions' inlined rows (writer.ts): they are merged with the files' rows.
  const inlined = await inlinedRowsFor(catalog, conn, table, columns, snapshot.snapshotId, { prefix, temporary });
  const rowsOf = new Map(all.map((f) => [f.dataFileId, f.recordCount]));
  const part = ident(STAGED_PARTITION);
  return {
    table,
    columns,
    current,
    files: async () => {
      const spans = shape.blockColumn ? await fileBlockSpans(catalog, table.tableId, shape.blockColumn) : new Map<number, never>();
      return [...current].flatMap(([partition, ids]) => ids.map((id) => ({ partition, span: spans.get(id) })));
    },
    rowsIn: (p) => (current.get(p) ?? []).reduce((s, id) => s + (rowsOf.get(id) ?? 0), 0),
    select: async (partitions, keep) => {
      const old = all.filter((f) => partitions.some((p) => current.get(p)?.includes(f.dataFileId)));
      for (const f of old) {
        await store.localCopy(store.lakeLocation(f.path));
        if (f.deleteFile) await store.localCopy(store.lakeLocation(f.deleteFile.path));
      }
      if (old.length === 0 && !inlined.inlined.length) return undefined;
      // The partitions of this network: their files' rows, and the rows inlined into the catalog there.
      const mine = [
        `network = ${literal(network)}`,
        `CAST(${ident(shape.partition)} AS VARCHAR) IN (${partitions.map(literal).join(', ')})`,
        ...(keep ? [keep] : []),
      ];
      return `SELECT * EXCLUDE (network, ${ident(shape.partition)}), CAST(${ident(shape.partition)} AS VARCHAR) AS ${part} FROM (${scanSql(table, columns, old, snapshot.snapshotId, inlined.inlined)}) WHERE ${mine.map((c) => `(${c})`).join(' AND ')}`;
    },
    release: () => inlined.release(),
  };
}

/** The current data files of each partition (by the partition column's value) of one network. */
async function partitionFiles(catalog: CatalogDb, tableId: number, snapshot: number, network: string): Promise<Map<string, number[]>> {
  const rows = await catalog.query(
    `SELECT d.data_file_id, p.partition_value AS value FROM ducklake_data_file d
     JOIN ducklake_file_partition_value n ON n.data_file_id = d.data_file_id AND n.partition_key_index = 0 AND n.partition_value = $3
     JOIN ducklake_file_partition_value p ON p.data_file_id = d.data_file_id AND p.partition_key_index = 1
     WHERE d.table_id = $1 AND d.begin_snapshot <= $2 AND (d.end_snapshot IS NULL OR $2 < d.end_snapshot)`,
    [tableId, snapshot, network],
  );
  const out = new Map<string, number[]>();
  for (const r of rows) out.set(String(r.value), [...(out.get(String(r.value)) ?? []), Number(r.data_file_id)]);
  return out;
}
