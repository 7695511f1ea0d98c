/**
 * Writing a DuckLake, following the spec's queries.md: create a table (one snapshot), commit data files written
 * by data-file.ts (immutable names, field ids = column ids, statistics from their footers): appended, or replacing a partition's rows (new files + the partition's current files ended at the new
 * snapshot), with the statistics and snapshot_changes, in ONE catalog transaction that makes ONE new snapshot.
 * Expiring snapshots and listing the files no snapshot needs any more are here too (for `chainlake maintain`).
 *
 * Every decision of a commit is taken inside the catalog transaction, from the catalog: which snapshot is newest,
 * which files a partition holds, the next file and row ids. The new snapshot's row is inserted first; its primary
 * key makes two committers that read the same newest snapshot collide, and the loser retries the whole transaction
 * on the new state (its staged files stay valid: their names are unique and never reused). Nothing is decided by
 * looking at the object store.
 */
import type { StagedFile } from './staged-file.js';
import type { CatalogDb, CatalogParam, CatalogRow, CatalogValue } from './catalog-db.js';
import { DuckLakeError, isCommitConflict } from './catalog-db.js';
import { LakeChangedError, refuseChangesSince } from './conflicts.js';
import { checkVersion, ident, uuidv7 } from './ddl.js';
import {
  allColumnIds,
  currentSnapshot,
  findTable,
  leafColumns,
  listAllColumns,
  listColumns,
  byteaColumns,
  listInlinedData,
  listTables,
  type LakeColumn,
  type LakeTable,
  type Snapshot,
} from './reader.js';
import { compareStat } from './data-file.js';
import { ducklakeTypeTree, type TypeTree } from './types.js';

export interface ColumnSpec {
  readonly name: string;
  /** A DuckDB type (`BIGINT`, `VARCHAR`, `DECIMAL(38,0)`, `DATE`, `TIMESTAMP WITH TIME ZONE`, ...). */
  readonly type: string;
  readonly nullable?: boolean;
}

export interface CommitInfo {
  readonly author?: string;
  readonly message?: string;
  readonly extraInfo?: string;
}

export interface CreateTableSpec extends CommitInfo {
  readonly name: string;
  readonly schema?: string;
  readonly columns: readonly ColumnSpec[];
  /** Identity partitioning by these columns, in order (e.g. `['block_date']`). */
  readonly partitionBy?: readonly string[];
}

export interface CommitResult {
  readonly snapshotId: number;
  /** How many times the catalog transaction was run (1 when no other committer got in the way). */
  readonly attempts: number;
}

export type { ColumnStats, StagedFile } from './staged-file.js';

export interface CommitHooks {
  /** Test seam: runs inside the catalog transaction right after the newest snapshot was read, before any write. */
  readonly afterSnapshotRead?: () => Promise<void>;
  /** Test seam: runs inside the catalog transaction after every statement, just before COMMIT. */
  readonly beforeCommit?: () => Promise<void>;
}

const MAX_ATTEMPTS = 20;
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const num = (v: CatalogValue | undefined): number => {
  if (typeof v === 'number') return v;
  throw new DuckLakeError(`expected a number in the catalog, found ${String(v)}`);
};

/** Runs one catalog transaction, again on a lost race with another committer, up to a bound. */
async function withRetry<T>(db: CatalogDb, work: (tx: CatalogDb, attempt: number) => Promise<T>): Promise<{ value: T; attempts: number }> {
  for (let attempt = 1; ; attempt++) {
    try {
      return { value: await db.transaction((tx) => work(tx, attempt)), attempts: attempt };
    } catch (error) {
      // Another writer changed what the commit replaces: its files were merged from rows that are not current any
      // more, so running the transaction again would not do; the caller prepares again.
      if (error instanceof LakeChangedError || !isCommitConflict(error) || attempt >= MAX_ATTEMPTS) throw error;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
}

/**
 * Inserts `rows` into `table` in one statement: each column of values is bound as one array parameter and
 * unnested (both DuckDB and PostgreSQL zip several unnests of equal length). `types` are the arrays' element
 * types; `select` is the inserted row with `$n` standing for the n-th column of values (constants allowed). A
 * commit's file statistics are thousands of rows: a VALUES tuple per row cost DuckDB five times as long to bind.
 */
async function insertRows(tx: CatalogDb, table: string, types: readonly string[], select: string, rows: readonly (readonly CatalogValue[])[]): Promise<void> {
  if (rows.length === 0) return;
  const columns = types.map((_, i) => rows.map((r) => r[i] ?? null));
  const unnested = types.map((t, i) => `unnest(CAST($${i + 1} AS ${t}[])) AS c${i + 1}`).join(', ');
  await tx.query(`INSERT INTO ${table} SELECT ${select.replace(/\$(\d+)/g, 'c$1')} FROM (SELECT ${unnested}) AS u`, columns);
}

/** Inserts the new snapshot first (its primary key is what serialises committers) and its change record. */
async function insertSnapshot(tx: CatalogDb, next: Omit<Snapshot, 'snapshotTime'>, changes: string, info: CommitInfo): Promise<void> {
  await tx.query(`INSERT INTO ducklake_snapshot VALUES ($1, NOW(), $2, $3, $4)`, [next.snapshotId, next.schemaVersion, next.nextCatalogId, next.nextFileId]);
  await tx.query(`INSERT INTO ducklake_snapshot_changes VALUES ($1, $2, $3, $4, $5)`, [
    next.snapshotId,
    changes,
    info.author ?? null,
    info.message ?? null,
    info.extraInfo ?? null,
  ]);
}

const quoted = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** A ducklake_column row of a new table. */
interface NewColumn {
  readonly id: number;
  readonly name: string;
  readonly type: string;
  readonly nullable: boolean;
  readonly parent: number | null;
}

/** What a new table is made of, checked before the catalog is opened: its column rows and its partition columns' ids. */
interface TableLayout {
  readonly columns: readonly NewColumn[];
  readonly partitionIds: readonly number[];
}

/** Creates a table (and its identity partitioning) in one new snapshot; returns it and the table. */
export async function createTable(db: CatalogDb, spec: CreateTableSpec): Promise<CommitResult & { tableId: number }> {
  const schemaName = spec.schema ?? 'main';
  const layout = tableLayout(spec);
  await checkVersion(db);
  const { value, attempts } = await withRetry(db, async (tx) => {
    const current = await currentSnapshot(tx);
    const schemaId = await schemaForNewTable(tx, schemaName, spec.name, current.snapshotId);
    const tableId = current.nextCatalogId;
    const partitionId = layout.partitionIds.length ? tableId + 1 : null;
    const next = {
      snapshotId: current.snapshotId + 1,
      schemaVersion: current.schemaVersion + 1,
      nextCatalogId: tableId + (partitionId === null ? 1 : 2),
      nextFileId: current.nextFileId,
    };
    await insertSnapshot(tx, next, `created_table:${quoted(schemaName)}.${quoted(spec.name)}`, spec);
    await insertTable(tx, { spec, layout, schemaId, tableId, partitionId, snapshot: next });
    return { snapshotId: next.snapshotId, tableId };
  });
  return { ...value, attempts };
}

/** The spec's columns as catalog rows and its partition columns as ids; fails on a name, column or partition key the lake cannot hold. */
function tableLayout(spec: CreateTableSpec): TableLayout {
  if (!NAME.test(spec.name)) throw new DuckLakeError(`table name '${spec.name}': use letters, digits and _ (it names a directory)`);
  if (spec.columns.length === 0) throw new DuckLakeError(`table ${spec.name}: no columns`);
  const seen = new Set<string>();
  // Column ids depth-first from 1, nested children right after their parent; column_order = column_id (as the
  // reference extension numbers them, and as Parquet field ids).
  const columns: NewColumn[] = [];
  const add = (name: string, tree: TypeTree, nullable: boolean, parent: number | null) => {
    const id = columns.length + 1;
    columns.push({ id, name, type: tree.type, nullable, parent });
    for (const child of tree.children) add(child.name, child, true, id);
    return id;
  };
  const topLevel = new Map<string, { id: number; nested: boolean }>();
  for (const c of spec.columns) {
    if (seen.has(c.name.toLowerCase())) throw new DuckLakeError(`table ${spec.name}: column ${c.name} appears twice`);
    seen.add(c.name.toLowerCase());
    const tree = ducklakeTypeTree(c.type, `table ${spec.name}, column ${c.name}`);
    topLevel.set(c.name, { id: add(c.name, tree, c.nullable ?? true, null), nested: tree.children.length > 0 });
  }
  const partitionIds = (spec.partitionBy ?? []).map((p) => {
    const column = topLevel.get(p);
    if (!column) throw new DuckLakeError(`table ${spec.name}: partition column ${p} is not one of its columns`);
    if (column.nested) throw new DuckLakeError(`table ${spec.name}: partition column ${p} is a nested column`);
    return column.id;
  });
  return { columns, partitionIds };
}

/** The id of the schema a new table goes into at `snapshot`; fails when that schema is missing or already has the table. */
async function schemaForNewTable(tx: CatalogDb, schemaName: string, tableName: string, snapshot: number): Promise<number> {
  const schema = (
    await tx.query(`SELECT schema_id FROM ducklake_schema WHERE schema_name = $1 AND begin_snapshot <= $2 AND (end_snapshot IS NULL OR $2 < end_snapshot)`, [
      schemaName,
      snapshot,
    ])
  )[0];
  if (!schema) throw new DuckLakeError(`schema ${schemaName} does not exist in this DuckLake`);
  if ((await listTables(tx, snapshot)).some((t) => t.name === tableName && t.schema.name === schemaName)) {
    throw new DuckLakeError(`table ${schemaName}.${tableName} already exists`);
  }
  return num(schema.schema_id);
}

/** A new table's rows valid from `snapshot`: the table, its columns, the schema version it makes and its partitioning. */
async function insertTable(
  tx: CatalogDb,
  created: {
    spec: CreateTableSpec;
    layout: TableLayout;
    schemaId: number;
    tableId: number;
    partitionId: number | null;
    snapshot: Pick<Snapshot, 'snapshotId' | 'schemaVersion'>;
  },
): Promise<void> {
  const { spec, layout, tableId, partitionId, snapshot } = created;
  await tx.query(`INSERT INTO ducklake_table VALUES ($1, $2, $3, NULL, $4, $5, $6, true)`, [
    tableId,
    uuidv7(),
    snapshot.snapshotId,
    created.schemaId,
    spec.name,
    `${spec.name}/`,
  ]);
  // As the reference extension writes them: no initial default, default_value 'NULL' (a literal, DuckDB dialect).
  await insertRows(
    tx,
    'ducklake_column',
    ['BIGINT', 'BIGINT', 'BIGINT', 'BIGINT', 'VARCHAR', 'VARCHAR', 'BOOLEAN', 'BIGINT'],
    `$1, $2, NULL, $3, $4, $5, $6, NULL, 'NULL', $7, $8, 'literal', 'duckdb'`,
    layout.columns.map((c) => [c.id, snapshot.snapshotId, tableId, c.id, c.name, c.type, c.nullable, c.parent]),
  );
  await tx.query(`INSERT INTO ducklake_schema_versions VALUES ($1, $2, $3)`, [snapshot.snapshotId, snapshot.schemaVersion, tableId]);
  if (partitionId === null) return;
  await tx.query(`INSERT INTO ducklake_partition_info VALUES ($1, $2, $3, NULL)`, [partitionId, tableId, snapshot.snapshotId]);
  for (const [index, columnId] of layout.partitionIds.entries()) {
    await tx.query(`INSERT INTO ducklake_partition_column VALUES ($1, $2, $3, $4, 'identity')`, [partitionId, tableId, index, columnId]);
  }
}

/**
 * Adds top-level columns to a table in one new snapshot (`altered_table`), as an ALTER TABLE ADD COLUMN does:
 * new ducklake_column rows valid from it, ids after every id the table ever used, no initial default (files
 * written before read the column as NULL), a new schema version. Returns the snapshot.
 */
export async function addColumns(
  db: CatalogDb,
  spec: { tableName: string; schema?: string; columns: readonly ColumnSpec[] } & CommitInfo,
): Promise<CommitResult> {
  if (spec.columns.length === 0) throw new DuckLakeError(`add columns to ${spec.tableName}: no column given`);
  const trees = spec.columns.map((c) => {
    const tree = ducklakeTypeTree(c.type, `table ${spec.tableName}, column ${c.name}`);
    if (tree.children.length) throw new DuckLakeError(`table ${spec.tableName}: adding the nested column ${c.name} is not supported`);
    return { ...c, ducklakeType: tree.type };
  });
  await checkVersion(db);
  const { value, attempts } = await withRetry(db, async (tx) => {
    const current = await currentSnapshot(tx);
    const table = await findTable(tx, current.snapshotId, spec.tableName, spec.schema);
    const existing = await listColumns(tx, table.tableId, current.snapshotId);
    for (const c of trees) {
      if (existing.some((e) => e.name.toLowerCase() === c.name.toLowerCase()))
        throw new DuckLakeError(`table ${spec.tableName} already has a column ${c.name}`);
    }
    const maxId = num((await tx.query(`SELECT COALESCE(MAX(column_id), 0) AS m FROM ducklake_column WHERE table_id = $1`, [table.tableId]))[0]!.m);
    const next = {
      snapshotId: current.snapshotId + 1,
      schemaVersion: current.schemaVersion + 1,
      nextCatalogId: current.nextCatalogId,
      nextFileId: current.nextFileId,
    };
    await insertSnapshot(tx, next, `altered_table:${table.tableId}`, spec);
    for (const [i, c] of trees.entries()) {
      const id = maxId + 1 + i;
      await tx.query(`INSERT INTO ducklake_column VALUES ($1, $2, NULL, $3, $4, $5, $6, NULL, 'NULL', $7, NULL, 'literal', 'duckdb')`, [
        id,
        next.snapshotId,
        table.tableId,
        id,
        c.name,
        c.ducklakeType,
        c.nullable ?? true,
      ]);
    }
    await tx.query(`INSERT INTO ducklake_schema_versions VALUES ($1, $2, $3)`, [next.snapshotId, next.schemaVersion, table.tableId]);
    return next.snapshotId;
  });
  return { snapshotId: value, attempts };
}

/** The identity partition columns of a table at a snapshot (empty when unpartitioned). */
export async function partitionColumns(db: CatalogDb, tableId: number, snapshot: number): Promise<{ partitionId: number | null; columnIds: number[] }> {
  const rows = await db.query(
    `SELECT p.partition_id, c.partition_key_index, c.column_id, c.${ident('transform')} AS transform
     FROM ducklake_partition_info p JOIN ducklake_partition_column c ON c.partition_id = p.partition_id AND c.table_id = p.table_id
     WHERE p.table_id = $1 AND p.begin_snapshot <= $2 AND (p.end_snapshot IS NULL OR $2 < p.end_snapshot)
     ORDER BY c.partition_key_index`,
    [tableId, snapshot],
  );
  if (rows.length === 0) return { partitionId: null, columnIds: [] };
  for (const r of rows) {
    if (r.transform !== 'identity') throw new DuckLakeError(`table ${tableId}: partition transform '${String(r.transform)}' is not supported (identity only)`);
  }
  return { partitionId: num(rows[0]!.partition_id), columnIds: rows.map((r) => num(r.column_id)) };
}

/** One table's part of a commit: its new files, and the partitions whose current rows they replace. */
export interface TableChange {
  readonly tableName: string;
  readonly schema?: string;
  readonly files: readonly StagedFile[];
  /**
   * Partitions (values by partition key index) whose current rows the new files replace: their current data files
   * (and delete files) end at the new snapshot. Empty: an append.
   */
  readonly replacePartitions?: readonly (readonly string[])[];
  /**
   * Current data files (by id) that end at the new snapshot, with their delete files, whatever their partition: files
   * a lake lost from its store, which no reader can read any more (`catalog rebuild --catalog --forget-missing`).
   */
  readonly endFiles?: readonly number[];
}

export interface CommitSpec extends CommitInfo, CommitHooks, TableChange {
  /**
   * The caller's own writes that must commit or fail with the snapshot (chainlake's windows and watermarks, the
   * views of a single-machine lake): run in the same catalog transaction after the snapshot's rows, with its id.
   * Run again on a retry.
   */
  readonly inTransaction?: (tx: CatalogDb, snapshotId: number) => Promise<void>;
  /** See MultiCommitSpec.readAt. */
  readonly readAt?: number;
}

export interface MultiCommitSpec extends CommitInfo, CommitHooks {
  readonly tables: readonly TableChange[];
  readonly inTransaction?: CommitSpec['inTransaction'];
  /**
   * The snapshot the replaced partitions' rows were read at: the commit fails with LakeChangedError when a later
   * snapshot changed a table whose rows it replaces (see conflicts.ts), instead of ending rows it never read.
   */
  readonly readAt?: number;
}

/**
 * Commits staged files as one new snapshot: appends them, and ends the current files of `replacePartitions`, with
 * data file rows, file statistics, partition values, table statistics and the snapshot's changes, all in one
 * catalog transaction. Retried whole when another committer took the snapshot id first.
 */
export async function commitFiles(db: CatalogDb, spec: CommitSpec): Promise<CommitResult & { endedFiles: number }> {
  const { tableName, schema, files, replacePartitions, endFiles, ...rest } = spec;
  return commitTables(db, { ...rest, tables: [{ tableName, schema, files, replacePartitions, endFiles }] });
}

/** What one table's change reads and decides inside the commit's transaction. */
interface PlannedChange {
  change: TableChange;
  table: LakeTable;
  columns: LakeColumn[];
  partitionId: number | null;
  ended: CatalogRow[];
  /** Rows another writer inlined into the catalog in the replaced partitions: they end at the new snapshot too. */
  endedInlined: { table: string; where: string; params: CatalogParam[]; rows: number }[];
}

/**
 * Commits the changes of several tables as ONE snapshot (a reader at any snapshot sees all of them or none, also
 * by snapshot id), in one catalog transaction; see commitFiles for what each table's change writes.
 */
export async function commitTables(db: CatalogDb, spec: MultiCommitSpec): Promise<CommitResult & { endedFiles: number }> {
  await checkVersion(db);
  const { value, attempts } = await withRetry(db, async (tx) => {
    const current = await currentSnapshot(tx);
    await spec.afterSnapshotRead?.();
    const tables = await listTables(tx, current.snapshotId);
    const columnsOf = await listAllColumns(tx, current.snapshotId);
    const chosen: { change: TableChange; table: LakeTable }[] = [];
    for (const change of spec.tables) {
      const schemaName = change.schema ?? 'main';
      const table = tables.find((t) => t.name === change.tableName && t.schema.name === schemaName);
      if (!table) {
        // Another writer dropped (or renamed) it after the commit read it: a change since the read, as any other
        // (the caller prepares again, and finds the table gone), not a broken catalog.
        if (spec.readAt !== undefined && current.snapshotId > spec.readAt) {
          const then = (await listTables(tx, spec.readAt)).find((t) => t.name === change.tableName && t.schema.name === schemaName);
          if (then) await refuseChangesSince(tx, spec.readAt, [then.tableId], new Map([[then.tableId, then.name]]));
        }
        throw new DuckLakeError(`table ${schemaName}.${change.tableName} does not exist at snapshot ${current.snapshotId} of this DuckLake`);
      }
      if (chosen.some((p) => p.table.tableId === table.tableId)) throw new DuckLakeError(`table ${table.name} appears twice in one commit`);
      chosen.push({ change, table });
    }
    // Free while nothing came after the snapshot read: the newest one is read anyway.
    if (spec.readAt !== undefined && current.snapshotId > spec.readAt) {
      const replacing = chosen.filter((c) => c.change.replacePartitions?.length || c.change.endFiles?.length).map((c) => c.table);
      await refuseChangesSince(
        tx,
        spec.readAt,
        replacing.map((t) => t.tableId),
        new Map(replacing.map((t) => [t.tableId, t.name])),
      );
    }
    const planned = await planChanges(tx, chosen, columnsOf, current.snapshotId);
    const fileCount = spec.tables.reduce((n, t) => n + t.files.length, 0);
    const next = {
      snapshotId: current.snapshotId + 1,
      schemaVersion: current.schemaVersion,
      nextCatalogId: current.nextCatalogId,
      nextFileId: current.nextFileId + fileCount,
    };
    const changes = planned.flatMap((p) => [
      ...(p.change.files.length ? [`inserted_into_table:${p.table.tableId}`] : []),
      ...(p.ended.length || p.endedInlined.length ? [`deleted_from_table:${p.table.tableId}`] : []),
    ]);
    if (changes.length === 0) {
      // Nothing for the lake (no file, no row to end): no snapshot; the caller's writes still commit, against the
      // newest snapshot (e.g. a watermark that moves over an empty block range).
      await spec.inTransaction?.(tx, current.snapshotId);
      return { snapshotId: current.snapshotId, endedFiles: 0 };
    }
    await insertSnapshot(tx, next, changes.join(','), spec);
    await writeChanges(tx, planned, next.snapshotId, current.nextFileId);
    await spec.inTransaction?.(tx, next.snapshotId);
    await spec.beforeCommit?.();
    return { snapshotId: next.snapshotId, endedFiles: planned.reduce((n, p) => n + p.ended.length, 0) };
  });
  return { snapshotId: value.snapshotId, endedFiles: value.endedFiles, attempts };
}

/**
 * Checks each table's change against the catalog and finds the files it ends. A constant number of statements
 * whatever the number of tables: a commit writes every dataset of a job, and each statement costs a round trip.
 */
async function planChanges(
  tx: CatalogDb,
  chosen: readonly { change: TableChange; table: LakeTable }[],
  columnsOf: ReadonlyMap<number, LakeColumn[]>,
  snapshotId: number,
): Promise<PlannedChange[]> {
  const ids = chosen.map((c) => c.table.tableId);
  if (ids.length === 0) return [];
  const partitions = await allPartitionColumns(tx, ids, snapshotId);
  await refuseCommittedFiles(tx, chosen, ids);
  const currentFiles = await currentFilesOfReplacing(tx, chosen);
  // Every change is checked before any inlined data is read: a bad change costs no statement.
  const plans = chosen.map(({ change, table }) => {
    const columns = columnsOf.get(table.tableId) ?? [];
    const { partitionId, columnIds: partitionKeys } = partitions.get(table.tableId) ?? { partitionId: null, columnIds: [] };
    checkChange(change, table, columns, partitionKeys);
    return { change, table, columns, partitionId, ended: filesToEnd(change, table, currentFiles), partitionKeys };
  });
  const out: PlannedChange[] = [];
  for (const { partitionKeys, ...p } of plans) {
    out.push({ ...p, endedInlined: await inlinedToEnd(tx, p.table, p.columns, partitionKeys, p.change.replacePartitions ?? []) });
  }
  return out;
}

/**
 * Fails when a staged file is in the catalog already. A staged file is committed once: a committer that lost the
 * answer to its COMMIT and tries again must not add the same rows twice. Its name is unique, so the catalog tells.
 */
async function refuseCommittedFiles(tx: CatalogDb, chosen: readonly { change: TableChange; table: LakeTable }[], ids: readonly number[]): Promise<void> {
  const paths = chosen.flatMap((c) => c.change.files.map((f) => f.path));
  if (paths.length === 0) return;
  const again = await tx.query(
    `SELECT table_id, path FROM ducklake_data_file WHERE table_id IN (SELECT unnest(CAST($1 AS BIGINT[]))) AND path IN (SELECT unnest(CAST($2 AS VARCHAR[])))`,
    [ids, paths],
  );
  if (again.length) {
    const table = chosen.find((c) => c.table.tableId === num(again[0]!.table_id))?.table.name ?? String(again[0]!.table_id);
    throw new DuckLakeError(`staged file ${String(again[0]!.path)} of ${table} is already committed`);
  }
}

/** A current data file's row and its partition values (by partition key index). */
interface CurrentFile {
  readonly row: CatalogRow;
  readonly values: string[];
}

/**
 * The current files of the tables whose change replaces partitions or ends files, by data file id: read once for
 * all of them and matched in memory (filesToEnd).
 */
async function currentFilesOfReplacing(tx: CatalogDb, chosen: readonly { change: TableChange; table: LakeTable }[]): Promise<Map<number, CurrentFile>> {
  const replacing = chosen.filter((c) => c.change.replacePartitions?.length || c.change.endFiles?.length).map((c) => c.table.tableId);
  const current = replacing.length
    ? await tx.query(
        `SELECT d.table_id, d.data_file_id, d.record_count, d.file_size_bytes, v.partition_key_index, v.partition_value FROM ducklake_data_file d
         LEFT JOIN ducklake_file_partition_value v ON v.data_file_id = d.data_file_id
         WHERE d.table_id IN (SELECT unnest(CAST($1 AS BIGINT[]))) AND d.end_snapshot IS NULL ORDER BY d.data_file_id, v.partition_key_index`,
        [replacing],
      )
    : [];
  const valuesOf = new Map<number, CurrentFile>();
  for (const r of current) {
    const id = num(r.data_file_id);
    const entry = valuesOf.get(id) ?? { row: r, values: [] };
    if (r.partition_key_index !== null) entry.values[num(r.partition_key_index)] = String(r.partition_value);
    valuesOf.set(id, entry);
  }
  return valuesOf;
}

/** Fails when a staged file was written for another table, for other partition keys or with columns the table no longer has, or a replaced partition has the wrong number of values. */
function checkChange(change: TableChange, table: LakeTable, columns: readonly LakeColumn[], partitionKeys: readonly number[]): void {
  const known = new Set(allColumnIds(columns));
  for (const f of change.files) {
    if (f.tableId !== table.tableId) throw new DuckLakeError(`staged file ${f.path} was written for table ${f.tableId}, not ${table.name}`);
    if ((f.partitionValues?.length ?? 0) !== partitionKeys.length) {
      throw new DuckLakeError(
        `staged file ${f.path}: ${f.partitionValues?.length ?? 0} partition values for ${partitionKeys.length} partition keys of ${table.name}`,
      );
    }
    if (f.columnStats.some((st) => !known.has(st.columnId))) throw new DuckLakeError(`staged file ${f.path} has columns ${table.name} no longer has`);
  }
  for (const p of change.replacePartitions ?? []) {
    if (p.length !== partitionKeys.length) throw new DuckLakeError(`replace of ${table.name}: ${p.length} partition values for ${partitionKeys.length} keys`);
  }
}

/** The table's current files the change ends: those of its replaced partitions and those it names. */
function filesToEnd(change: TableChange, table: LakeTable, currentFiles: ReadonlyMap<number, CurrentFile>): CatalogRow[] {
  const wanted = new Set((change.replacePartitions ?? []).map((p) => JSON.stringify(p)));
  const endIds = new Set(change.endFiles ?? []);
  return [...currentFiles.values()]
    .filter((e) => num(e.row.table_id) === table.tableId && (wanted.has(JSON.stringify(e.values)) || endIds.has(num(e.row.data_file_id))))
    .map((e) => e.row);
}

/**
 * The rows of `partitions` that another writer inlined into the catalog (ducklake_inlined_data_<table>_<version>,
 * the reference extension's default for small inserts) and that are current: a commit replacing those partitions
 * read them into its files (load/write/lake-state.ts), so it ends them in its snapshot, as a delete of inlined rows does.
 */
async function inlinedToEnd(
  tx: CatalogDb,
  table: LakeTable,
  columns: readonly LakeColumn[],
  partitionKeys: readonly number[],
  partitions: readonly (readonly string[])[],
): Promise<PlannedChange['endedInlined']> {
  if (partitions.length === 0 || partitionKeys.length === 0) return [];
  const names = partitionKeys.map((id) => columns.find((c) => c.columnId === id)?.name);
  if (names.some((n) => n === undefined)) return [];
  const params: CatalogParam[] = partitionKeys.map((_, i) => partitions.map((p) => p[i] ?? null));
  const unnested = names.map((_, i) => `unnest(CAST($${i + 1} AS VARCHAR[])) AS k${i}`).join(', ');
  const out: PlannedChange['endedInlined'] = [];
  for (const data of await listInlinedData(tx, table)) {
    if (!names.every((n) => data.columns.includes(n!))) continue;
    // A PostgreSQL catalog's bytea column (the reference's VARCHAR there) compares as its UTF-8 text, not its hex.
    const bytea = await byteaColumns(tx, data.name);
    const text = (n: string) => (bytea.has(n) ? `convert_from(${ident(n)}, 'UTF8')` : `CAST(${ident(n)} AS VARCHAR)`);
    const where = `end_snapshot IS NULL AND EXISTS (SELECT 1 FROM (SELECT ${unnested}) AS u WHERE ${names
      .map((n, i) => `u.k${i} = ${text(n!)}`)
      .join(' AND ')})`;
    const rows = num((await tx.query(`SELECT count(*) AS n FROM ${ident(data.name)} WHERE ${where}`, params))[0]?.n ?? 0);
    if (rows > 0) out.push({ table: data.name, where, params, rows });
  }
  return out;
}

/** The identity partitioning of several tables at a snapshot (see partitionColumns), by table id. */
async function allPartitionColumns(
  tx: CatalogDb,
  tableIds: readonly number[],
  snapshot: number,
): Promise<Map<number, { partitionId: number | null; columnIds: number[] }>> {
  const rows = await tx.query(
    `SELECT p.table_id, p.partition_id, c.partition_key_index, c.column_id, c.${ident('transform')} AS transform
     FROM ducklake_partition_info p JOIN ducklake_partition_column c ON c.partition_id = p.partition_id AND c.table_id = p.table_id
     WHERE p.table_id IN (SELECT unnest(CAST($1 AS BIGINT[]))) AND p.begin_snapshot <= $2 AND (p.end_snapshot IS NULL OR $2 < p.end_snapshot)
     ORDER BY p.table_id, c.partition_key_index`,
    [tableIds, snapshot],
  );
  const out = new Map<number, { partitionId: number | null; columnIds: number[] }>();
  for (const r of rows) {
    if (r.transform !== 'identity')
      throw new DuckLakeError(`table ${num(r.table_id)}: partition transform '${String(r.transform)}' is not supported (identity only)`);
    const entry = out.get(num(r.table_id)) ?? { partitionId: num(r.partition_id), columnIds: [] };
    entry.columnIds.push(num(r.column_id));
    out.set(num(r.table_id), entry);
  }
  return out;
}

/** Writes every table's change at snapshot `snapshotId`, files numbered from `firstFileId` in order, with a statement per catalog table. */
async function writeChanges(tx: CatalogDb, planned: readonly PlannedChange[], snapshotId: number, firstFileId: number): Promise<void> {
  await endReplacedRows(tx, planned, snapshotId);
  const ids = planned.map((p) => p.table.tableId);
  const rows = changeRows(planned, await tableStatsOf(tx, ids), snapshotId, firstFileId);
  await insertChangeRows(tx, ids, rows);
  await mergeTableColumnStats(
    tx,
    planned.filter((p) => p.change.files.length),
  );
}

/** The catalog rows a commit inserts, one list per catalog table (each inserted in one statement). */
interface ChangeRows {
  readonly files: CatalogValue[][];
  readonly columnStats: CatalogValue[][];
  readonly partitionValues: CatalogValue[][];
  readonly tableStats: CatalogValue[][];
}

/** Ends at `snapshotId` the data files (with their delete files) and the inlined rows the changes replace. */
async function endReplacedRows(tx: CatalogDb, planned: readonly PlannedChange[], snapshotId: number): Promise<void> {
  const endedIds = planned.flatMap((p) => p.ended.map((r) => num(r.data_file_id)));
  if (endedIds.length) {
    const list = `(SELECT unnest(CAST($2 AS BIGINT[])))`;
    await tx.query(`UPDATE ducklake_data_file SET end_snapshot = $1 WHERE end_snapshot IS NULL AND data_file_id IN ${list}`, [snapshotId, endedIds]);
    await tx.query(`UPDATE ducklake_delete_file SET end_snapshot = $1 WHERE end_snapshot IS NULL AND data_file_id IN ${list}`, [snapshotId, endedIds]);
  }
  for (const e of planned.flatMap((p) => p.endedInlined)) {
    await tx.query(`UPDATE ${ident(e.table)} SET end_snapshot = $${e.params.length + 1} WHERE ${e.where}`, [...e.params, snapshotId]);
  }
}

/** The tables' ducklake_table_stats rows before the commit, by table id (a table without files yet has none). */
async function tableStatsOf(tx: CatalogDb, ids: readonly number[]): Promise<Map<number, CatalogRow>> {
  const rows = await tx.query(
    `SELECT table_id, record_count, next_row_id, file_size_bytes FROM ducklake_table_stats WHERE table_id IN (SELECT unnest(CAST($1 AS BIGINT[])))`,
    [ids],
  );
  return new Map(rows.map((r) => [num(r.table_id), r]));
}

/** The rows of the new files (ids from `firstFileId`, row ids after each table's last) and each table's new statistics. */
function changeRows(planned: readonly PlannedChange[], oldStats: ReadonlyMap<number, CatalogRow>, snapshotId: number, firstFileId: number): ChangeRows {
  const rows: ChangeRows = { files: [], columnStats: [], partitionValues: [], tableStats: [] };
  let fileId = firstFileId;
  for (const p of planned) {
    const { table, partitionId, ended } = p;
    const files = p.change.files;
    const old = oldStats.get(table.tableId);
    let nextRowId = old ? num(old.next_row_id) : 0;
    for (const f of files) {
      rows.files.push([fileId, table.tableId, snapshotId, f.path, f.recordCount, f.fileSizeBytes, f.footerSize, nextRowId, partitionId]);
      nextRowId += f.recordCount;
      for (const st of f.columnStats) {
        rows.columnStats.push([fileId, table.tableId, st.columnId, st.columnSizeBytes, st.valueCount, st.nullCount, st.min, st.max, st.containsNan]);
      }
      for (const [index, value] of (f.partitionValues ?? []).entries()) rows.partitionValues.push([fileId, table.tableId, index, value]);
      fileId++;
    }
    // Table statistics: exact counts and sizes of the current files; column min/max stay bounds (the spec allows it).
    const added = files.reduce((n, f) => n + f.recordCount, 0);
    const addedBytes = files.reduce((n, f) => n + f.fileSizeBytes, 0);
    const removed = ended.reduce((n, r) => n + num(r.record_count), 0) + p.endedInlined.reduce((n, e) => n + e.rows, 0);
    const removedBytes = ended.reduce((n, r) => n + num(r.file_size_bytes), 0);
    rows.tableStats.push([
      table.tableId,
      (old ? num(old.record_count) : 0) + added - removed,
      nextRowId,
      (old ? num(old.file_size_bytes) : 0) + addedBytes - removedBytes,
    ]);
  }
  return rows;
}

/** Inserts the commit's rows; the tables' statistics are replaced whole, for every table of the commit at once. */
async function insertChangeRows(tx: CatalogDb, ids: readonly number[], rows: ChangeRows): Promise<void> {
  const B = 'BIGINT';
  await insertRows(
    tx,
    'ducklake_data_file',
    [B, B, B, 'VARCHAR', B, B, B, B, B],
    `$1, $2, $3, NULL, NULL, $4, true, 'parquet', $5, $6, $7, $8, $9, NULL, NULL, NULL`,
    rows.files,
  );
  await insertRows(
    tx,
    'ducklake_file_column_stats',
    [B, B, B, B, B, B, 'VARCHAR', 'VARCHAR', 'BOOLEAN'],
    `$1, $2, $3, $4, $5, $6, $7, $8, $9, NULL`,
    rows.columnStats,
  );
  await insertRows(tx, 'ducklake_file_partition_value', [B, B, B, 'VARCHAR'], `$1, $2, $3, $4`, rows.partitionValues);
  await tx.query(`DELETE FROM ducklake_table_stats WHERE table_id IN (SELECT unnest(CAST($1 AS BIGINT[])))`, [ids]);
  await insertRows(tx, 'ducklake_table_stats', [B, B, B, B], `$1, $2, $3, $4`, rows.tableStats);
}

/** Each table's column statistics merged with its new files' (one read, one delete, one insert for all tables). */
async function mergeTableColumnStats(tx: CatalogDb, planned: readonly PlannedChange[]): Promise<void> {
  if (planned.length === 0) return;
  const ids = planned.map((p) => p.table.tableId);
  const existing = new Map(
    (
      await tx.query(
        `SELECT table_id, column_id, contains_null, contains_nan, min_value, max_value FROM ducklake_table_column_stats WHERE table_id IN (SELECT unnest(CAST($1 AS BIGINT[])))`,
        [ids],
      )
    ).map((r) => [`${num(r.table_id)}/${num(r.column_id)}`, r]),
  );
  const rows: CatalogValue[][] = [];
  for (const { table, columns, change } of planned) {
    for (const { column } of leafColumns(columns)) {
      const old = existing.get(`${table.tableId}/${column.columnId}`);
      let min = old ? (old.min_value as string | null) : null;
      let max = old ? (old.max_value as string | null) : null;
      let containsNull = old ? old.contains_null === true : false;
      let containsNan: boolean | null = old ? (old.contains_nan as boolean | null) : null;
      // A table-wide bound exists only while every file has one; a file without min/max leaves the table without.
      let bounded = old ? min !== null && max !== null : true;
      for (const f of change.files) {
        const st = f.columnStats.find((x) => x.columnId === column.columnId);
        if (!st) continue;
        containsNull ||= st.nullCount > 0;
        if (st.containsNan !== null) containsNan = (containsNan ?? false) || st.containsNan;
        if (st.min === null || st.max === null) {
          if (st.nullCount < st.valueCount) bounded = false;
          continue;
        }
        if (min === null || compareStat(column.type, st.min, min) < 0) min = st.min;
        if (max === null || compareStat(column.type, st.max, max) > 0) max = st.max;
      }
      if (!bounded) {
        min = null;
        max = null;
      }
      rows.push([table.tableId, column.columnId, containsNull, containsNan, min, max]);
    }
  }
  await tx.query(`DELETE FROM ducklake_table_column_stats WHERE table_id IN (SELECT unnest(CAST($1 AS BIGINT[])))`, [ids]);
  await insertRows(tx, 'ducklake_table_column_stats', ['BIGINT', 'BIGINT', 'BOOLEAN', 'BOOLEAN', 'VARCHAR', 'VARCHAR'], `$1, $2, $3, $4, $5, $6, NULL`, rows);
}

export interface ScheduledFile {
  readonly dataFileId: number;
  /** Full location: data_path + the stored relative path, or the stored absolute path. */
  readonly path: string;
  readonly storedPath: string;
  readonly pathIsRelative: boolean;
  readonly scheduledAt: Date;
}

interface ExpireOptions {
  readonly olderThan?: Date;
  readonly keepLast?: number;
  readonly ids?: readonly number[];
}

/**
 * Expires snapshots (never the newest): those older than `olderThan`, all but the newest `keepLast`, or those
 * listed in `ids` (the conditions given must all hold). Data and
 * delete files that no remaining snapshot needs leave the catalog and are scheduled for deletion
 * (ducklake_files_scheduled_for_deletion, paths relative to data_path), in one catalog transaction, as the
 * reference extension's ducklake_expire_snapshots does. Files are not touched here: see filesToDelete.
 */
export async function expireSnapshots(db: CatalogDb, opts: ExpireOptions): Promise<{ expired: number[]; scheduledFiles: number }> {
  if (opts.olderThan === undefined && opts.keepLast === undefined && opts.ids === undefined)
    throw new DuckLakeError('expireSnapshots: give olderThan, keepLast or ids');
  if (opts.ids?.length === 0) return { expired: [], scheduledFiles: 0 };
  await checkVersion(db);
  const { value } = await withRetry(db, async (tx) => {
    const newest = await currentSnapshot(tx);
    const expired = await snapshotsToExpire(tx, opts, newest.snapshotId);
    if (expired.length === 0) return { expired, scheduledFiles: 0 };
    const list = expired.map((_, i) => `$${i + 1}`).join(', ');
    await tx.query(`DELETE FROM ducklake_snapshot WHERE snapshot_id IN (${list})`, expired);
    await tx.query(`DELETE FROM ducklake_snapshot_changes WHERE snapshot_id IN (${list})`, expired);
    const tables = new Map((await listTables(tx, newest.snapshotId)).map((t) => [t.tableId, t]));
    const deadData = await dropUnneededDataFiles(tx, tables);
    const deadDeletes = await dropUnneededDeleteFiles(tx, tables, deadData);
    return { expired, scheduledFiles: deadData.length + deadDeletes };
  });
  return value;
}

/** The ids of the snapshots every given condition of `opts` expires, oldest first; never `newest`. */
async function snapshotsToExpire(tx: CatalogDb, opts: ExpireOptions, newest: number): Promise<number[]> {
  const params: CatalogParam[] = [newest];
  let filter = 'snapshot_id < $1';
  if (opts.olderThan) {
    params.push(opts.olderThan.toISOString());
    filter += ` AND snapshot_time < CAST($${params.length} AS TIMESTAMPTZ)`;
  }
  if (opts.ids !== undefined) {
    params.push([...opts.ids]);
    filter += ` AND snapshot_id IN (SELECT unnest(CAST($${params.length} AS BIGINT[])))`;
  }
  if (opts.keepLast !== undefined) {
    params.push(newest - Math.max(1, opts.keepLast) + 1);
    filter += ` AND snapshot_id < $${params.length}`;
  }
  return (await tx.query(`SELECT snapshot_id FROM ducklake_snapshot WHERE ${filter} ORDER BY snapshot_id`, params)).map((r) => num(r.snapshot_id));
}

/** A condition on the file row `alias`: it has ended and no remaining snapshot lies in its lifetime. */
const noSnapshotNeeds = (alias: string) =>
  `${alias}.end_snapshot IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ducklake_snapshot s WHERE s.snapshot_id >= ${alias}.begin_snapshot AND s.snapshot_id < ${alias}.end_snapshot)`;

/** Data files no remaining snapshot needs: scheduled for deletion and removed with their statistics and partition values. Returns their ids. */
async function dropUnneededDataFiles(tx: CatalogDb, tables: ReadonlyMap<number, LakeTable>): Promise<number[]> {
  const dead = await tx.query(`SELECT data_file_id, table_id, path, path_is_relative FROM ducklake_data_file d WHERE ${noSnapshotNeeds('d')}`);
  await scheduleForDeletion(tx, tables, dead, 'data_file_id');
  const ids = dead.map((r) => num(r.data_file_id));
  if (ids.length) {
    const idList = ids.map((_, i) => `$${i + 1}`).join(', ');
    for (const t of ['ducklake_data_file', 'ducklake_file_column_stats', 'ducklake_file_variant_stats', 'ducklake_file_partition_value']) {
      await tx.query(`DELETE FROM ${t} WHERE data_file_id IN (${idList})`, ids);
    }
  }
  return ids;
}

/** Delete files no remaining snapshot needs, or whose data file was just dropped: scheduled for deletion and removed. Returns how many. */
async function dropUnneededDeleteFiles(tx: CatalogDb, tables: ReadonlyMap<number, LakeTable>, deadData: readonly number[]): Promise<number> {
  const orphanFilter = deadData.length ? `d.data_file_id IN (${deadData.map((_, i) => `$${i + 1}`).join(', ')}) OR ` : '';
  const dead = await tx.query(
    `SELECT delete_file_id, table_id, path, path_is_relative FROM ducklake_delete_file d WHERE ${orphanFilter}(${noSnapshotNeeds('d')})`,
    [...deadData],
  );
  await scheduleForDeletion(tx, tables, dead, 'delete_file_id');
  if (dead.length) {
    const ids = dead.map((r) => num(r.delete_file_id));
    await tx.query(`DELETE FROM ducklake_delete_file WHERE delete_file_id IN (${ids.map((_, i) => `$${i + 1}`).join(', ')})`, ids);
  }
  return dead.length;
}

/** Inserts each file row into ducklake_files_scheduled_for_deletion, its path made relative to data_path where it can be. */
async function scheduleForDeletion(tx: CatalogDb, tables: ReadonlyMap<number, LakeTable>, rows: readonly CatalogRow[], idColumn: string): Promise<void> {
  for (const r of rows) {
    const table = tables.get(num(r.table_id));
    let stored = String(r.path);
    let relative = r.path_is_relative !== false;
    if (relative && table) {
      // Relative to data_path, as the extension stores it: schema path + table path + file path.
      if (!table.pathIsRelative) {
        stored = table.path + stored;
        relative = false;
      } else if (!table.schema.pathIsRelative) {
        stored = table.schema.path + table.path + stored;
        relative = false;
      } else stored = table.schema.path + table.path + stored;
    } else if (relative) {
      throw new DuckLakeError(
        `file ${num(r[idColumn])} belongs to table ${num(r.table_id)}, which is not current: dropped tables are not expired by chainlake yet`,
      );
    }
    await tx.query(`INSERT INTO ducklake_files_scheduled_for_deletion VALUES ($1, $2, $3, NOW())`, [num(r[idColumn]), stored, relative]);
  }
}

/** Files scheduled for deletion (optionally only those scheduled before `olderThan`), with full paths. */
export async function filesToDelete(db: CatalogDb, opts: { olderThan?: Date; dataPath?: string } = {}): Promise<ScheduledFile[]> {
  const metadata = await checkVersion(db);
  const dataPath = opts.dataPath ?? metadata.get('data_path') ?? '';
  const params: CatalogValue[] = [];
  let filter = '';
  if (opts.olderThan) {
    params.push(opts.olderThan.toISOString());
    filter = 'WHERE schedule_start < CAST($1 AS TIMESTAMPTZ)';
  }
  const rows = await db.query(
    `SELECT data_file_id, path, path_is_relative, schedule_start FROM ducklake_files_scheduled_for_deletion ${filter} ORDER BY data_file_id`,
    params,
  );
  return rows.map((r) => {
    const relative = r.path_is_relative !== false;
    const stored = String(r.path);
    return {
      dataFileId: num(r.data_file_id),
      path: relative ? (dataPath.endsWith('/') ? dataPath : `${dataPath}/`) + stored : stored,
      storedPath: stored,
      pathIsRelative: relative,
      scheduledAt: r.schedule_start instanceof Date ? r.schedule_start : new Date(String(r.schedule_start)),
    };
  });
}

/** Forgets files once the caller has deleted them from the store (a file deleted twice is not an error there). */
export async function forgetDeletedFiles(db: CatalogDb, files: readonly ScheduledFile[]): Promise<void> {
  if (files.length === 0) return;
  const ids = files.map((f) => f.dataFileId);
  await db.query(`DELETE FROM ducklake_files_scheduled_for_deletion WHERE data_file_id IN (${ids.map((_, i) => `$${i + 1}`).join(', ')})`, ids);
}
