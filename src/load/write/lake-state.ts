/**
 * The single-machine lake is a DuckLake: `catalog.duckdb` holds the DuckLake's tables (src/ducklake/) beside
 * chainlake's runs, windows and watermarks, and the data files live under the lake directory with immutable
 * names (`main/<table>/network=<n>/<date column>=<value>/ducklake-<uuid>.parquet`). This module is what a commit
 * knows of a lake, on one machine or distributed (its PostgreSQL catalog, its files copied from the store): the
 * tables of the datasets it writes (created, or given the columns a newer declaration adds), the files each
 * partition holds at the newest snapshot, and (LakeState.partitionsOf) the one reader of a table's current rows
 * that both committers' merge reads.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import type { CatalogDb, CatalogParam, CatalogRow } from '../../ducklake/catalog-db.js';
import { DuckLakeError, duckDbQuery } from '../../ducklake/catalog-db.js';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import {
  currentSnapshot,
  inlinedRowsFor,
  listAllColumns,
  listDataFiles,
  inlinedValues,
  listInlinedData,
  listTables,
  scanSql,
  tablePath,
  type LakeColumn,
  type LakeTable,
} from '../../ducklake/reader.js';
import { duckdbTypeOfTree } from '../../ducklake/types.js';
import { ident, literal, literalList } from '../sql.js';
import { ensureTable, refuseEndedTables, refuseSchemaChanges, tableMatches } from './lake-tables.js';
import { droppedTables, refuseReplaced } from './dropped-tables.js';
import { STAGED_PARTITION, type TableShape } from '../schema.js';
import type { LakePartitions } from './lake-partitions.js';
import { fileBlockSpans } from './replace.js';

/** A Parquet file of a partition at the newest snapshot. */
export interface CurrentFile {
  dataFileId: number;
  /** Absolute path. */
  path: string;
  rows: number;
  bytes: number;
  /**
   * Not a data file of the lake: the partition's rows at the newest snapshot, written under the command's work
   * folder because another DuckLake writer left some of them where a file alone does not give them (rows it
   * inlined into the catalog, rows it deleted). It stands for all the partition's files: merging reads it instead.
   */
  materialised?: true;
  /** For a materialised file: the partition's data files it stands for, and their size. */
  replaced?: { files: number; bytes: number };
  /** The file's lowest and highest block (block-ranged datasets): which partitions a replaced window reaches. */
  blockSpan?: { min: number | null; max: number | null };
}

export interface LakeTableState {
  table: LakeTable;
  /** The table's columns at the newest snapshot, in order (their ids are the files' Parquet field ids). */
  columns: LakeColumn[];
  /** The table's directory (absolute, with a trailing `/`). */
  dir: string;
  /** The partition columns' ids (network, then the date), as ducklake_partition_column orders them. */
  partitionColumnIds: number[];
  /** Current files by partition (`partitionKey(network, value)`). */
  partitions: Map<string, CurrentFile[]>;
  /**
   * Partitions whose rows another DuckLake writer left partly outside their files (inlined into the catalog,
   * deleted) and that this state did not write out (read without a work folder, or a PostgreSQL catalog's without an
   * engine): their files alone are not their rows.
   */
  unmerged?: ReadonlySet<string>;
}

/** The error for reading a partition's rows from its files when another writer left some of them elsewhere. */
function unmergedError(table: string, network: string, value?: string): DuckLakeError {
  return new DuckLakeError(
    `${table} (${network}${value === undefined ? '' : `, ${value}`}) holds rows another DuckLake writer inlined into the catalog or deleted, which this command cannot read from its files: with the ducklake extension, CALL ducklake_flush_inlined_data('<lake>') writes inlined rows to files; a chainlake run or compact merges them`,
  );
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

/** Makes a lake file (an absolute path under the lake's data path) present at that path on this machine. */
export type FileAccess = (file: string) => Promise<unknown>;

/**
 * The lake's tables and their current files, as of the newest snapshot: the one reader of a table's current rows
 * for both committers. `access` is how a file reaches this machine (a distributed lake's store copies it; a lake on
 * this machine's disk is there already).
 */
export class LakeState {
  constructor(
    readonly snapshotId: number,
    private readonly tables: ReadonlyMap<string, LakeTableState>,
    private readonly access?: FileAccess,
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
    if (this.tables.get(name)?.unmerged?.has(partitionKey(network, value))) throw unmergedError(name, network, value);
    return this.tables.get(name)?.partitions.get(partitionKey(network, value)) ?? [];
  }

  /** Every current file of a table (of one network, when given), absolute paths. */
  tableFiles(name: string, network?: string): string[] {
    return this.currentFiles(name, network).map((f) => f.path);
  }

  /** tableFiles, each present on this machine. */
  async localFiles(name: string, network?: string): Promise<string[]> {
    const files = this.currentFiles(name, network);
    await this.present(files);
    return files.map((f) => f.path);
  }

  private currentFiles(name: string, network?: string): CurrentFile[] {
    const t = this.tables.get(name);
    if (!t) return [];
    for (const k of t.unmerged ?? []) if (network === undefined || k.startsWith(`${network}\u0000`)) throw unmergedError(name, k.split('\u0000')[0]!);
    return [...t.partitions].filter(([k]) => network === undefined || k.startsWith(`${network}\u0000`)).flatMap(([, files]) => files);
  }

  /** Files made present on this machine (a partition written out under a work folder is there already). */
  private async present(files: readonly CurrentFile[]): Promise<void> {
    if (this.access) for (const f of files) if (!f.materialised) await this.access(f.path);
  }

  all(): LakeTableState[] {
    return [...this.tables.values()];
  }

  /** One network's partitions of a table, as a merge reads them (mergeTable): its files by path. */
  partitionsOf(shape: TableShape, network: string): LakePartitions {
    const files = (p: string) => this.files(shape.name, network, p);
    const part = ident(STAGED_PARTITION);
    // The partition of a file is its folder's name (`<column>=<value>`), as LakePaths lays it out.
    const folder = literal(`/${shape.partition}=([^/]+)/[^/]+$`);
    return {
      files: async () =>
        [...this.table(shape.name).partitions].flatMap(([key, list]) => {
          const [net, value] = key.split('\u0000') as [string, string];
          return net === network ? list.map((f) => ({ partition: value, span: f.blockSpan })) : [];
        }),
      rowsIn: (p) => files(p).reduce((sum, f) => sum + f.rows, 0),
      select: async (partitions, keep) => {
        const old = partitions.flatMap((p) => files(p));
        await this.present(old);
        return old.length === 0
          ? undefined
          : `SELECT * EXCLUDE (filename), regexp_extract(filename, ${folder}, 1) AS ${part} FROM read_parquet(${literalList(old.map((f) => f.path))}, hive_partitioning = false, union_by_name = true, filename = true)${keep ? ` WHERE ${keep}` : ''}`;
      },
    };
  }
}

/**
 * The shape a merge writes a table's partitions with: the declaration's columns, then the columns the table has and
 * the declaration lacks (another DuckLake writer's ADD COLUMN, or a column an older declaration had), so that their
 * values are read from the current rows and kept, not written NULL, also where a fetch replaces a row (`kept`). The
 * declared shape itself when there is none.
 */
export function mergeShape(shape: TableShape, state: LakeTableState): TableShape {
  const declared = new Set([...shape.columns.map((c) => c.name), 'network', shape.partition]);
  const others = state.columns.filter((c) => !declared.has(c.name));
  if (others.length === 0) return shape;
  const typed = others.map((c) => ({ name: c.name, type: duckdbTypeOfTree(c, `table ${shape.name}, column ${c.name}`), doc: '' }));
  return { ...shape, columns: [...shape.columns, ...typed], kept: typed.map((c) => c.name) };
}

/** How readLakeState reads a lake: see its fields. */
export interface LakeStateOptions {
  /**
   * Where the partitions another DuckLake writer changed in the catalog (inlined rows, deletes) are written out to
   * be merged; without it they are `unmerged`.
   */
  workDir?: string;
  /**
   * The DuckDB connection a PostgreSQL catalog's changed partitions are written out on (its inlined rows are copied
   * into it first); a DuckDB catalog's own DuckDB writes them, where its inlined rows are. None: `unmerged`.
   */
  engine?: DuckDBConnection;
  /** How a lake file reaches this machine (see LakeState). */
  access?: FileAccess;
  /** Only these tables are read, not the lake's every one. */
  only?: readonly TableShape[];
  /** A decoding of every log the lake holds: a decoded table another writer dropped is created again (dropped-tables.ts). */
  decoding?: boolean;
  /** With `only`: their files' block spans too (a merge that replaces windows reads them), as `ensure`'s always. */
  spans?: boolean;
  /**
   * Tables read but not ensured (a compaction's, a decoding's logs): refused as `ensure`'s and `only`'s are when
   * another writer renamed, dropped or retyped what chainlake declares of them (refuseSchemaChanges).
   */
  declared?: readonly TableShape[];
}

/**
 * Reads the lake's tables and their current files. With `ensure`, first creates the tables of those shapes that
 * the lake lacks (and adds columns a newer declaration has): call it inside the catalog's transaction then.
 * `dataPath` is the lake's directory as this process sees it (a moved lake still reads its files).
 */
export async function readLakeState(db: CatalogDb, dataPath: string, ensure: readonly TableShape[] = [], opts: LakeStateOptions = {}): Promise<LakeState> {
  const { snapshot, listed } = await ensureTables(db, ensure, opts.decoding ? { decoding: true } : {});
  const only = opts.only && new Set([...opts.only, ...(opts.declared ?? [])].map((s) => s.name));
  const tables = await tableStates(db, snapshot, dataPath, listed, only);
  // `ensure`'s tables were checked as they were ensured; those only read are checked here, from the columns just read.
  const read = [...(opts.only ?? []), ...(opts.declared ?? [])];
  for (const shape of read) {
    const state = tables.get(shape.name);
    if (state && !tableMatches(state.columns, shape)) await refuseSchemaChanges(db, shape, state.table, state.columns);
  }
  await refuseEndedTables(
    db,
    read.filter((s) => !tables.has(s.name)).map((s) => s.name),
  );
  const fileKeys = await readCurrentFiles(db, tables, only !== undefined);
  // Files of the block-ranged datasets a commit writes know their block span: the partitions a window fetched
  // again reaches (load/write/replace.ts).
  for (const shape of [...ensure, ...(opts.spans ? (opts.only ?? []) : [])]) {
    const state = shape.blockColumn ? tables.get(shape.name) : undefined;
    if (!state || state.partitions.size === 0) continue;
    const spans = await fileBlockSpans(db, state.table.tableId, shape.blockColumn!);
    for (const list of state.partitions.values()) for (const f of list) f.blockSpan = spans.get(f.dataFileId);
  }
  const engine = db.dialect === 'duckdb' ? undefined : opts.engine;
  for (const [state, keys] of await sharedPartitions(db, tables, fileKeys)) {
    if (opts.workDir && (db.dialect === 'duckdb' || engine))
      await materialise(db, state, [...keys], snapshot, dataPath, { ...opts, workDir: opts.workDir, engine });
    else state.unmerged = keys;
  }
  return new LakeState(snapshot, tables, opts.access);
}

/** The tables and their columns at a snapshot. */
type Listed = { tables: LakeTable[]; columns: Map<number, LakeColumn[]> };

/**
 * Creates the tables of `shapes` the lake lacks (or that lack a column of this declaration); the newest snapshot
 * after, and its tables when nothing had to be created. On one machine: the ledger is in `db`.
 */
export async function ensureTables(
  db: CatalogDb,
  shapes: readonly TableShape[],
  opts: { decoding?: boolean } = {},
): Promise<{ snapshot: number; listed?: Listed }> {
  const snapshot = (await currentSnapshot(db)).snapshotId;
  if (shapes.length === 0) return { snapshot };
  const listed = await listTables(db, snapshot);
  // A table of these names another writer dropped and created again: refused while the ledger's claims on the
  // dropped one stand, or when chainlake cannot merge into it (dropped-tables.ts refuseReplaced).
  await refuseReplaced({ db })(shapes.filter((s) => listed.some((t) => t.name === s.name && t.schema.name === 'main')));
  const columns = await listAllColumns(db, snapshot);
  // Only a table that is missing, or lacks a column of this declaration, costs statements of its own.
  const missing = shapes.filter((shape) => {
    const table = listed.find((t) => t.name === shape.name && t.schema.name === 'main');
    return !table || !tableMatches(columns.get(table.tableId) ?? [], shape);
  });
  if (missing.length === 0) return { snapshot, listed: { tables: listed, columns } };
  // A dataset's table another DuckLake writer dropped is created again once the ledger has no mark of it: the run's
  // start deleted them as planning voided its claims (load/ledger/planning.ts voidClaims), in this transaction. With
  // marks left, it was dropped after the run was planned, and the commit refuses (refuseEndedTables); `_rejects` and
  // derived tables as dropped-tables.ts says.
  for (const shape of missing) await ensureTable(db, shape, { voided: droppedTables({ db }, opts) });
  return { snapshot: (await currentSnapshot(db)).snapshotId };
}

/** The lake's tables of schema `main` at `snapshot`, by name, with no file yet. */
async function tableStates(db: CatalogDb, snapshot: number, dataPath: string, read?: Listed, only?: ReadonlySet<string>): Promise<Map<string, LakeTableState>> {
  const listed = read?.tables ?? (await listTables(db, snapshot));
  const columns = read?.columns ?? (await listAllColumns(db, snapshot));
  const partitioning = new Map<number, number[]>();
  for (const r of await db.query(`SELECT table_id, column_id FROM ducklake_partition_column ORDER BY table_id, partition_key_index`)) {
    partitioning.set(Number(r.table_id), [...(partitioning.get(Number(r.table_id)) ?? []), Number(r.column_id)]);
  }
  const tables = new Map<string, LakeTableState>();
  for (const table of listed) {
    if (table.schema.name !== 'main' || (only && !only.has(table.name))) continue;
    tables.set(table.name, {
      table,
      columns: columns.get(table.tableId) ?? [],
      partitionColumnIds: partitioning.get(table.tableId) ?? [],
      dir: tablePath(dataPath, table),
      partitions: new Map(),
    });
  }
  return tables;
}

/** Where a current data file belongs: its table's state and its partition's key. */
type FileKeys = Map<number, { state: LakeTableState; key: string; deleted: boolean }>;

/** Fills each table's partitions with their current files; each file's table and partition, by data file id. */
async function readCurrentFiles(db: CatalogDb, tables: ReadonlyMap<string, LakeTableState>, filtered: boolean): Promise<FileKeys> {
  const byId = new Map([...tables.values()].map((t) => [t.table.tableId, t]));
  const rows = await db.query(
    `SELECT d.table_id, d.data_file_id, d.path, d.path_is_relative, d.record_count, d.file_size_bytes, n.partition_value AS network, p.partition_value AS value,
            (SELECT count(*) FROM ducklake_delete_file x WHERE x.data_file_id = d.data_file_id AND x.end_snapshot IS NULL) AS deletes
     FROM ducklake_data_file d
     JOIN ducklake_file_partition_value n ON n.data_file_id = d.data_file_id AND n.partition_key_index = 0
     JOIN ducklake_file_partition_value p ON p.data_file_id = d.data_file_id AND p.partition_key_index = 1
     WHERE d.end_snapshot IS NULL${filtered ? ' AND d.table_id IN (SELECT unnest(CAST($1 AS BIGINT[])))' : ''}
     ORDER BY d.data_file_id`,
    filtered ? [[...byId.keys()]] : [],
  );
  const fileKeys: FileKeys = new Map();
  for (const r of rows) {
    const state = byId.get(Number(r.table_id));
    if (!state) continue;
    const key = partitionKey(String(r.network), String(r.value));
    fileKeys.set(Number(r.data_file_id), { state, key, deleted: Number(r.deletes) > 0 });
    const list = state.partitions.get(key) ?? [];
    list.push({
      dataFileId: Number(r.data_file_id),
      path: r.path_is_relative === false ? String(r.path) : state.dir + String(r.path),
      rows: Number(r.record_count),
      bytes: Number(r.file_size_bytes),
    });
    state.partitions.set(key, list);
  }
  return fileKeys;
}

/**
 * Partitions holding rows of another DuckLake writer that their files alone do not give: rows deleted (delete files,
 * deletes inlined into the catalog) or inlined into the catalog, the reference extension's defaults for small writes.
 * Two statements for a lake no other writer touched (a commit reads this state every time).
 */
async function sharedPartitions(db: CatalogDb, tables: ReadonlyMap<string, LakeTableState>, fileKeys: FileKeys): Promise<Map<LakeTableState, Set<string>>> {
  const shared = new Map<LakeTableState, Set<string>>();
  const share = (state: LakeTableState, key: string) => shared.set(state, (shared.get(state) ?? new Set()).add(key));
  for (const f of fileKeys.values()) if (f.deleted) share(f.state, f.key);
  const inlinedTables = new Set(
    (
      await db.query(
        `SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'ducklake_inlined%' AND table_schema = current_schema() AND table_catalog = current_database()`,
      )
    ).map((r) => String(r.table_name)),
  );
  const inlinedOwners = new Set((await db.query(`SELECT DISTINCT table_id FROM ducklake_inlined_data_tables`)).map((r) => Number(r.table_id)));
  for (const state of tables.values()) {
    const partitionColumn = state.columns.find((c) => c.columnId === state.partitionColumnIds[1])?.name;
    if (!partitionColumn) continue;
    for (const data of inlinedOwners.has(state.table.tableId) ? await listInlinedData(db, state.table) : []) {
      if (!data.columns.includes('network') || !data.columns.includes(partitionColumn)) continue;
      for (const [network, value] of await inlinedValues(db, data.name, ['network', partitionColumn])) share(state, partitionKey(network!, value!));
    }
    const deletes = `ducklake_inlined_delete_${state.table.tableId}`;
    for (const id of inlinedTables.has(deletes) ? await inlinedDeletedFiles(db, deletes) : []) {
      const file = fileKeys.get(id);
      if (file) share(file.state, file.key);
    }
  }
  return shared;
}

/** Data file ids with deletes inlined into the catalog (`name`: ducklake_inlined_delete_<table_id>). */
async function inlinedDeletedFiles(db: CatalogDb, name: string): Promise<number[]> {
  return (await db.query(`SELECT DISTINCT file_id FROM ${ident(name)}`)).map((r) => Number(r.file_id));
}

/**
 * Writes each of `keys`' partitions as it reads at `snapshot` (files minus deleted rows, plus inlined rows) to a
 * Parquet file under `workDir`, in a `<partition column>=<value>` folder as the lake's own (merges take the
 * partition from the folder), and makes it the partition's one current file for whatever merges it. Where the
 * inlined rows can be read writes it: a DuckDB catalog's own DuckDB, or `engine` with a PostgreSQL catalog's
 * inlined rows copied into it.
 */
async function materialise(
  db: CatalogDb,
  state: LakeTableState,
  keys: string[],
  snapshot: number,
  dataPath: string,
  at: { workDir: string; engine?: DuckDBConnection; access?: FileAccess },
): Promise<void> {
  const { workDir, engine } = at;
  const partitionColumn = state.columns.find((c) => c.columnId === state.partitionColumnIds[1])!.name;
  const files = await listDataFiles(db, state.table, snapshot, dataPath);
  const inlined = engine
    ? await inlinedRowsFor(db, engine, state.table, state.columns, snapshot, { prefix: '__chainlake_changed_', temporary: true })
    : { inlined: await listInlinedData(db, state.table), release: async () => undefined };
  try {
    for (const key of keys) {
      const [network, value] = key.split('\u0000') as [string, string];
      const current = state.partitions.get(key) ?? [];
      const ids = new Set(current.map((f) => f.dataFileId));
      const read = files.filter((f) => ids.has(f.dataFileId));
      for (const f of read) for (const p of [f.path, ...(f.deleteFile ? [f.deleteFile.path] : [])]) await at.access?.(p);
      const target = path.join(
        workDir,
        state.table.name,
        `network=${encodeURIComponent(network)}`,
        `${partitionColumn}=${encodeURIComponent(value)}`,
        'rows.parquet',
      );
      await mkdir(path.dirname(target), { recursive: true });
      const rows = `SELECT * FROM (${scanSql(state.table, state.columns, read, snapshot, inlined.inlined)}) WHERE CAST(network AS VARCHAR) = ${literal(network)} AND CAST(${ident(partitionColumn)} AS VARCHAR) = ${literal(value)}`;
      const copy = `COPY (${rows}) TO ${literal(target)} (FORMAT parquet, RETURN_STATS)`;
      const copied = await (engine ? duckDbQuery(engine, copy, []) : db.query(copy));
      state.partitions.set(key, [
        {
          dataFileId: -1,
          path: target,
          rows: Number(copied[0]?.count ?? 0),
          bytes: Number(copied[0]?.file_size_bytes ?? 0),
          materialised: true,
          replaced: { files: current.length, bytes: current.reduce((n, f) => n + f.bytes, 0) },
        },
      ]);
    }
  } finally {
    await inlined.release();
  }
}
