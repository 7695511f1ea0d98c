/**
 * Reading a DuckLake, following the spec's queries.md: pick a snapshot (the newest, an id, or the newest at a
 * time), list the schemas, tables and columns valid at it, list the table's data files and their delete files at
 * it, and build one DuckDB query over those Parquet files that returns the table's rows at that snapshot.
 *
 * Everything a reader decides comes from the catalog: a file belongs to snapshot S when
 * `begin_snapshot <= S < end_snapshot` (or end_snapshot IS NULL). Writers only ever add rows and set end_snapshot
 * on rows that were open, so the file list of a committed snapshot never changes: a reader holding snapshot S
 * reads S whole while S+1 commits.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import type { CatalogDb, CatalogRow, CatalogValue } from './catalog-db.js';
import { duckDbQuery, DuckLakeError } from './catalog-db.js';
import { checkVersion, ident } from './ddl.js';
import { duckdbTypeOfTree } from './types.js';

export interface Snapshot {
  readonly snapshotId: number;
  readonly snapshotTime: Date;
  readonly schemaVersion: number;
  readonly nextCatalogId: number;
  readonly nextFileId: number;
}

/** Which snapshot to read: the newest (undefined), a snapshot id, or the newest committed at or before a time. */
export type AsOf = undefined | { readonly snapshot: number } | { readonly time: Date };

export interface LakeSchema {
  readonly schemaId: number;
  readonly name: string;
  readonly path: string;
  readonly pathIsRelative: boolean;
}

export interface LakeTable {
  readonly tableId: number;
  readonly tableUuid: string;
  readonly name: string;
  readonly schema: LakeSchema;
  readonly path: string;
  readonly pathIsRelative: boolean;
}

export interface LakeColumn {
  readonly columnId: number;
  readonly name: string;
  /** The DuckLake type name as stored (`int64`, `decimal(38,0)`, `varchar`, ...). */
  readonly type: string;
  readonly order: number;
  readonly nullsAllowed: boolean;
  readonly initialDefault: string | null;
  readonly parentColumn: number | null;
  /** Child columns of a nested column (list: `element`; struct: its fields; map: key, value), in order. */
  readonly children: LakeColumn[];
}

/** The leaf (non-nested) columns under `columns`, each with its path of names from the top-level column. */
export function leafColumns(columns: readonly LakeColumn[], prefix: string[] = []): { column: LakeColumn; path: string[] }[] {
  return columns.flatMap((c) => (c.children.length ? leafColumns(c.children, [...prefix, c.name]) : [{ column: c, path: [...prefix, c.name] }]));
}

/** Every column id under `columns`, nested ones included. */
export function allColumnIds(columns: readonly LakeColumn[]): number[] {
  return columns.flatMap((c) => [c.columnId, ...allColumnIds(c.children)]);
}

export interface DeleteFile {
  readonly deleteFileId: number;
  readonly path: string;
  readonly format: string;
  readonly deleteCount: number;
}

export interface DataFile {
  readonly dataFileId: number;
  /** The file's location, resolved against the data path, the schema path and the table path. */
  readonly path: string;
  /** The path as stored in the catalog. */
  readonly storedPath: string;
  readonly recordCount: number;
  readonly fileSizeBytes: number;
  readonly footerSize: number | null;
  readonly rowIdStart: number | null;
  readonly beginSnapshot: number;
  readonly partitionId: number | null;
  readonly mappingId: number | null;
  readonly partialMax: number | null;
  readonly deleteFile: DeleteFile | null;
  /**
   * Positions (file row numbers) of rows another writer deleted without a delete file, valid at the snapshot
   * read: the reference extension's inlined deletes (`ducklake_inlined_delete_<table_id>`), its default for
   * small deletes.
   */
  readonly inlinedDeletes: readonly number[];
}

/**
 * A table of rows another writer inlined into the catalog (`ducklake_inlined_data_<table_id>_<schema_version>`,
 * the reference extension's default for small inserts): its name and its columns as that schema version named
 * them. Its rows valid at a snapshot belong to the table beside the data files.
 */
export interface InlinedData {
  readonly name: string;
  readonly schemaVersion: number;
  readonly columns: readonly string[];
}

/** A catalog row's column; undefined means the query did not select it (a bug here, never in the catalog). */
const present = (v: CatalogValue | undefined): CatalogValue => {
  if (v === undefined) throw new DuckLakeError('a catalog query did not select a column it reads');
  return v;
};
const num = (value: CatalogValue | undefined): number => {
  const v = present(value);
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && /^-?\d+$/.test(v)) return Number(v);
  throw new DuckLakeError(`expected a number in the catalog, found ${String(v)}`);
};
const numOrNull = (v: CatalogValue | undefined): number | null => (present(v) === null ? null : num(v));
const str = (v: CatalogValue | undefined): string => (present(v) === null ? '' : String(v));
const toDate = (v: CatalogValue | undefined): Date => {
  const d = present(v);
  return d instanceof Date ? d : new Date(String(d));
};

function toSnapshot(row: CatalogRow): Snapshot {
  return {
    snapshotId: num(row.snapshot_id),
    snapshotTime: toDate(row.snapshot_time),
    schemaVersion: num(row.schema_version),
    nextCatalogId: num(row.next_catalog_id),
    nextFileId: num(row.next_file_id),
  };
}

const SNAPSHOT_COLUMNS = 'snapshot_id, snapshot_time, schema_version, next_catalog_id, next_file_id';

/** The newest snapshot (queries.md "Get Current Snapshot"). */
export async function currentSnapshot(db: CatalogDb): Promise<Snapshot> {
  const rows = await db.query(`SELECT ${SNAPSHOT_COLUMNS} FROM ducklake_snapshot WHERE snapshot_id = (SELECT max(snapshot_id) FROM ducklake_snapshot)`);
  if (!rows[0]) throw new DuckLakeError('the DuckLake catalog has no snapshot: it was not initialised');
  return toSnapshot(rows[0]);
}

/** The snapshot to read for `asOf`; an id that does not exist (never made, or expired) is an error, not a guess. */
export async function resolveSnapshot(db: CatalogDb, asOf: AsOf): Promise<Snapshot> {
  if (asOf === undefined) return currentSnapshot(db);
  if ('snapshot' in asOf) {
    const rows = await db.query(`SELECT ${SNAPSHOT_COLUMNS} FROM ducklake_snapshot WHERE snapshot_id = $1`, [asOf.snapshot]);
    if (!rows[0]) throw new DuckLakeError(`snapshot ${asOf.snapshot} does not exist in this DuckLake (never committed, or expired)`);
    return toSnapshot(rows[0]);
  }
  const rows = await db.query(
    `SELECT ${SNAPSHOT_COLUMNS} FROM ducklake_snapshot WHERE snapshot_id = (
       SELECT max(snapshot_id) FROM ducklake_snapshot WHERE snapshot_time <= CAST($1 AS TIMESTAMPTZ))`,
    [asOf.time.toISOString()],
  );
  if (!rows[0]) throw new DuckLakeError(`no snapshot of this DuckLake was committed at or before ${asOf.time.toISOString()}`);
  return toSnapshot(rows[0]);
}

/** All snapshots, oldest first, with their recorded changes. */
export async function listSnapshots(db: CatalogDb): Promise<(Snapshot & { changes: string | null })[]> {
  const rows = await db.query(
    `SELECT s.snapshot_id, s.snapshot_time, s.schema_version, s.next_catalog_id, s.next_file_id, c.changes_made
     FROM ducklake_snapshot s LEFT JOIN ducklake_snapshot_changes c ON c.snapshot_id = s.snapshot_id ORDER BY s.snapshot_id`,
  );
  return rows.map((r) => ({ ...toSnapshot(r), changes: r.changes_made === null ? null : String(r.changes_made) }));
}

const VALID_AT = (alias: string, param: string) => `${param} >= ${alias}begin_snapshot AND (${param} < ${alias}end_snapshot OR ${alias}end_snapshot IS NULL)`;

/** Schemas valid at a snapshot (queries.md "List Schemas"). */
export async function listSchemas(db: CatalogDb, snapshot: number): Promise<LakeSchema[]> {
  const rows = await db.query(`SELECT schema_id, schema_name, path, path_is_relative FROM ducklake_schema WHERE ${VALID_AT('', '$1')} ORDER BY schema_id`, [
    snapshot,
  ]);
  return rows.map((r) => ({ schemaId: num(r.schema_id), name: str(r.schema_name), path: str(r.path), pathIsRelative: r.path_is_relative !== false }));
}

/** Tables valid at a snapshot, in every schema valid at it (queries.md "List Tables"). */
export async function listTables(db: CatalogDb, snapshot: number): Promise<LakeTable[]> {
  const schemas = new Map((await listSchemas(db, snapshot)).map((s) => [s.schemaId, s]));
  const rows = await db.query(
    `SELECT table_id, CAST(table_uuid AS VARCHAR) AS table_uuid, schema_id, table_name, path, path_is_relative
     FROM ducklake_table WHERE ${VALID_AT('', '$1')} ORDER BY table_id`,
    [snapshot],
  );
  const tables: LakeTable[] = [];
  for (const r of rows) {
    const schema = schemas.get(num(r.schema_id));
    if (!schema) continue; // a table outlived by its schema is not visible at this snapshot
    tables.push({
      tableId: num(r.table_id),
      tableUuid: str(r.table_uuid),
      name: str(r.table_name),
      schema,
      path: str(r.path),
      pathIsRelative: r.path_is_relative !== false,
    });
  }
  return tables;
}

/** One table by name at a snapshot; names compare exactly (DuckLake names are case-sensitive in the catalog). */
export async function findTable(db: CatalogDb, snapshot: number, name: string, schemaName = 'main'): Promise<LakeTable> {
  const table = (await listTables(db, snapshot)).find((t) => t.name === name && t.schema.name === schemaName);
  if (!table) throw new DuckLakeError(`table ${schemaName}.${name} does not exist at snapshot ${snapshot} of this DuckLake`);
  return table;
}

/**
 * Columns of a table at a snapshot, ordered by column_order (queries.md "Show the Structure of a Table"): the
 * top-level columns, each with its nested child columns (parent_column) under `children`.
 */
export async function listColumns(db: CatalogDb, tableId: number, snapshot: number): Promise<LakeColumn[]> {
  const rows = await db.query(
    `SELECT table_id, column_id, column_name, column_type, column_order, nulls_allowed, initial_default, parent_column
     FROM ducklake_column WHERE table_id = $1 AND ${VALID_AT('', '$2')}
     ORDER BY column_order`,
    [tableId, snapshot],
  );
  return columnTree(rows, tableId, snapshot);
}

/** The columns of every table at a snapshot (see listColumns), by table id: one query for a whole catalog. */
export async function listAllColumns(db: CatalogDb, snapshot: number): Promise<Map<number, LakeColumn[]>> {
  const rows = await db.query(
    `SELECT table_id, column_id, column_name, column_type, column_order, nulls_allowed, initial_default, parent_column
     FROM ducklake_column WHERE ${VALID_AT('', '$1')}
     ORDER BY table_id, column_order`,
    [snapshot],
  );
  const byTable = new Map<number, CatalogRow[]>();
  for (const r of rows) byTable.set(num(r.table_id), [...(byTable.get(num(r.table_id)) ?? []), r]);
  return new Map([...byTable].map(([id, list]) => [id, columnTree(list, id, snapshot)]));
}

/** One table's column rows (in column_order) as top-level columns with their nested children. */
function columnTree(rows: readonly CatalogRow[], tableId: number, snapshot: number): LakeColumn[] {
  const all = rows.map((r): LakeColumn => ({
    columnId: num(r.column_id),
    name: str(r.column_name),
    type: str(r.column_type),
    order: num(r.column_order),
    nullsAllowed: r.nulls_allowed !== false,
    initialDefault: r.initial_default === null ? null : String(r.initial_default),
    parentColumn: numOrNull(r.parent_column),
    children: [],
  }));
  const byId = new Map(all.map((c) => [c.columnId, c]));
  const roots: LakeColumn[] = [];
  for (const c of all) {
    if (c.parentColumn === null) roots.push(c);
    else {
      const parent = byId.get(c.parentColumn);
      if (!parent)
        throw new DuckLakeError(
          `table ${tableId}: column ${c.name} (${c.columnId}) has parent ${c.parentColumn}, which does not exist at snapshot ${snapshot}`,
        );
      parent.children.push(c);
    }
  }
  return roots;
}

/** Joins two path parts with `/`, the separator DuckLake stores on every OS. */
const joinPath = (base: string, rel: string): string => (base === '' || base.endsWith('/') ? base + rel : `${base}/${rel}`);

/** The directory of a table's files: data_path + schema path + table path, each relative to the one before it. */
export function tablePath(dataPath: string, table: LakeTable): string {
  const schemaDir = table.schema.pathIsRelative ? joinPath(dataPath, table.schema.path) : table.schema.path;
  return table.pathIsRelative ? joinPath(schemaDir, table.path) : table.path;
}

/** Reads the catalog's data_path (or takes `override`, as the extension's OVERRIDE_DATA_PATH does). */
export async function dataPathOf(db: CatalogDb, override?: string): Promise<string> {
  if (override !== undefined) return override.endsWith('/') ? override : `${override}/`;
  const metadata = await checkVersion(db);
  const dataPath = metadata.get('data_path');
  if (!dataPath) throw new DuckLakeError('the DuckLake catalog has no data_path in ducklake_metadata');
  return dataPath;
}

/** The columns of a table of the catalog database itself (not a DuckLake table), in order; empty when there is no such table. */
async function catalogTableColumns(db: CatalogDb, name: string): Promise<string[]> {
  const rows = await db.query(
    `SELECT column_name FROM information_schema.columns
     WHERE table_name = $1 AND table_schema = current_schema() AND table_catalog = current_database() ORDER BY ordinal_position`,
    [name],
  );
  return rows.map((r) => str(r.column_name));
}

/** The inlined-data tables of a table (every schema version that has one), oldest first. */
export async function listInlinedData(db: CatalogDb, table: LakeTable): Promise<InlinedData[]> {
  const rows = await db.query(`SELECT table_name, schema_version FROM ducklake_inlined_data_tables WHERE table_id = $1 ORDER BY schema_version`, [
    table.tableId,
  ]);
  const out: InlinedData[] = [];
  for (const r of rows) {
    const name = str(r.table_name);
    if (!/^ducklake_inlined_data_\d+_\d+$/.test(name)) throw new DuckLakeError(`table ${table.name}: inlined data table '${name}' has an unexpected name`);
    const columns = (await catalogTableColumns(db, name)).filter((c) => c !== 'row_id' && c !== 'begin_snapshot' && c !== 'end_snapshot');
    // Registered but not created (or dropped): nothing to read.
    if (columns.length) out.push({ name, schemaVersion: num(r.schema_version), columns });
  }
  return out;
}

/** Whether any inlined table of `inlined` has rows valid at `snapshot`. */
export async function hasInlinedRows(db: CatalogDb, inlined: readonly InlinedData[], snapshot: number): Promise<boolean> {
  for (const t of inlined) {
    const rows = await db.query(`SELECT count(*) AS n FROM ${ident(t.name)} WHERE ${VALID_AT('', '$1')}`, [snapshot]);
    if (num(rows[0]?.n) > 0) return true;
  }
  return false;
}

/**
 * The columns of an inlined-data table the writer kept as bytea: the reference extension keeps VARCHAR columns so in
 * a PostgreSQL catalog (text in a DuckDB one, which has no bytea).
 */
export async function byteaColumns(db: CatalogDb, name: string): Promise<Set<string>> {
  const rows = await db.query(
    `SELECT column_name FROM information_schema.columns
     WHERE table_name = $1 AND table_schema = current_schema() AND table_catalog = current_database() AND data_type = 'bytea'`,
    [name],
  );
  return new Set(rows.map((r) => str(r.column_name)));
}

/**
 * The distinct values of `columns` among an inlined-data table's current rows (not ended), as text: the partitions
 * another writer's inlined rows fall in. A column the writer kept as bytea (byteaColumns) is decoded from the hex
 * text PostgreSQL casts it to.
 */
export async function inlinedValues(db: CatalogDb, name: string, columns: readonly string[]): Promise<string[][]> {
  const bytea = await byteaColumns(db, name);
  const rows = await db.query(
    `SELECT DISTINCT ${columns.map((c, i) => `CAST(${ident(c)} AS VARCHAR) AS v${i}`).join(', ')} FROM ${ident(name)} WHERE end_snapshot IS NULL`,
  );
  return rows.map((r) =>
    columns.map((c, i) => {
      const v = r[`v${i}`];
      return bytea.has(c) && typeof v === 'string' && v.startsWith('\\x') ? Buffer.from(v.slice(2), 'hex').toString('utf8') : str(v);
    }),
  );
}

/** Rows per statement when copying inlined rows into DuckDB: a statement of bounded size, whatever the table's. */
const INLINED_COPY_ROWS = 1000;

/** Inlined rows a scan reads, and how to drop what was made for it. */
export interface InlinedRows {
  /** The inlined-data tables as `scanSql` reads them on the engine's connection. */
  readonly inlined: InlinedData[];
  /** Drops the copies made on the engine's connection (nothing on a DuckDB catalog). */
  release(): Promise<void>;
}

/**
 * The rows another writer inlined into the catalog (`inlined`) that are valid at `snapshot`, where a scan running on
 * `conn` reads them. A DuckDB catalog is the scan's own database: its tables are read as they are. A PostgreSQL
 * catalog's inlined-data tables are ordinary tables DuckDB does not reach: their valid rows are read through `db`
 * (as text, whatever PostgreSQL type the writer chose) and copied into tables of `conn` named `prefix` + their name,
 * each column cast to the type the lake declares for it (`columns`, at the snapshot read), so that both committers and
 * both readers merge and read them alike.
 */
export async function inlinedRowsFor(
  db: CatalogDb,
  conn: DuckDBConnection,
  table: LakeTable,
  columns: readonly LakeColumn[],
  snapshot: number,
  opts: { prefix: string; temporary: boolean },
): Promise<InlinedRows> {
  const inlined = await listInlinedData(db, table);
  if (db.dialect === 'duckdb') return { inlined, release: async () => undefined };
  const where = `table ${table.schema.name}.${table.name}`;
  const copies: InlinedData[] = [];
  const release = async () => {
    for (const c of copies) await conn.run(`DROP TABLE IF EXISTS ${ident(c.name)}`);
  };
  try {
    for (const t of inlined) {
      const kept = columns.filter((c) => t.columns.includes(c.name));
      const name = `${opts.prefix}${t.name}`;
      const typed = kept.map((c) => ({ name: c.name, type: duckdbTypeOfTree(c, `${where}, column ${c.name}`) }));
      const declared = ['begin_snapshot BIGINT', 'end_snapshot BIGINT', ...typed.map((c) => `${ident(c.name)} ${c.type}`)];
      await conn.run(`CREATE OR REPLACE ${opts.temporary ? 'TEMP ' : ''}TABLE ${ident(name)} (${declared.join(', ')})`);
      copies.push({ name, schemaVersion: t.schemaVersion, columns: kept.map((c) => c.name) });
      const rows = await db.query(
        `SELECT CAST(begin_snapshot AS VARCHAR) AS b, CAST(end_snapshot AS VARCHAR) AS e${kept
          .map((c, i) => `, CAST(${ident(c.name)} AS VARCHAR) AS c${i}`)
          .join('')} FROM ${ident(t.name)} WHERE ${VALID_AT('', '$1')} ORDER BY row_id`,
        [snapshot],
      );
      // The reference extension keeps VARCHAR columns as bytea in PostgreSQL, whose text form is hex: back to UTF-8.
      const bytea = await byteaColumns(db, t.name);
      for (const [i, c] of kept.entries()) {
        if (!bytea.has(c.name)) continue;
        for (const r of rows) {
          const v = r[`c${i}`];
          if (typeof v === 'string' && v.startsWith('\\x')) r[`c${i}`] = Buffer.from(v.slice(2), 'hex').toString('utf8');
        }
      }
      const fields = ['b', 'e', ...kept.map((_, i) => `c${i}`)];
      const types = ['BIGINT', 'BIGINT', ...typed.map((c) => c.type)];
      for (let i = 0; i < rows.length; i += INLINED_COPY_ROWS) {
        const batch = rows.slice(i, i + INLINED_COPY_ROWS);
        const params = fields.map((f) => batch.map((r) => (r[f] === null || r[f] === undefined ? null : String(r[f]))));
        // Each value travels as text, as the catalog gave it, and takes the declared type here.
        await duckDbQuery(
          conn,
          `INSERT INTO ${ident(name)} SELECT ${types.map((type, j) => `CAST(v${j} AS ${type})`).join(', ')}
           FROM (SELECT ${fields.map((_, j) => `unnest(CAST($${j + 1} AS VARCHAR[])) AS v${j}`).join(', ')})`,
          params,
        );
      }
    }
  } catch (error) {
    await release().catch(() => undefined);
    throw error;
  }
  return { inlined: copies, release };
}

/** File row numbers deleted through the catalog (inlined deletes) by data file id, valid at `snapshot`. */
async function inlinedDeletes(db: CatalogDb, table: LakeTable, snapshot: number): Promise<Map<number, number[]>> {
  const name = `ducklake_inlined_delete_${table.tableId}`;
  const out = new Map<number, number[]>();
  if ((await catalogTableColumns(db, name)).length === 0) return out;
  const rows = await db.query(`SELECT file_id, row_id FROM ${ident(name)} WHERE begin_snapshot <= $1 ORDER BY file_id, row_id`, [snapshot]);
  for (const r of rows) out.set(num(r.file_id), [...(out.get(num(r.file_id)) ?? []), num(r.row_id)]);
  return out;
}

/**
 * The data files of a table at a snapshot, each with its delete file valid at that snapshot (queries.md
 * "SELECT"). Paths are resolved against `dataPath`.
 */
export async function listDataFiles(db: CatalogDb, table: LakeTable, snapshot: number, dataPath: string): Promise<DataFile[]> {
  const rows = await db.query(
    `SELECT data.data_file_id, data.path, data.path_is_relative, data.record_count, data.file_size_bytes, data.footer_size,
            data.row_id_start, data.begin_snapshot, data.partition_id, data.mapping_id, data.partial_max, data.file_format,
            del.delete_file_id, del.path AS delete_path, del.path_is_relative AS delete_path_is_relative, del.format AS delete_format,
            del.delete_count
     FROM ducklake_data_file AS data
     LEFT JOIN (SELECT * FROM ducklake_delete_file WHERE table_id = $1 AND ${VALID_AT('', '$2')}) AS del
       ON del.data_file_id = data.data_file_id
     WHERE data.table_id = $1 AND ${VALID_AT('data.', '$2')}
     ORDER BY data.file_order, data.data_file_id`,
    [table.tableId, snapshot],
  );
  const base = tablePath(dataPath, table);
  const resolve = (p: string, relative: CatalogValue | undefined) => (relative === false ? p : joinPath(base, p));
  const deleted = rows.length ? await inlinedDeletes(db, table, snapshot) : new Map<number, number[]>();
  return rows.map((r) => {
    const format = str(r.file_format);
    if (format !== 'parquet') throw new DuckLakeError(`data file ${num(r.data_file_id)} of ${table.name}: format '${format}' is not parquet`);
    return {
      dataFileId: num(r.data_file_id),
      path: resolve(str(r.path), r.path_is_relative),
      storedPath: str(r.path),
      recordCount: num(r.record_count),
      fileSizeBytes: num(r.file_size_bytes),
      footerSize: numOrNull(r.footer_size),
      rowIdStart: numOrNull(r.row_id_start),
      beginSnapshot: num(r.begin_snapshot),
      partitionId: numOrNull(r.partition_id),
      mappingId: numOrNull(r.mapping_id),
      partialMax: numOrNull(r.partial_max),
      deleteFile:
        r.delete_file_id === null
          ? null
          : {
              deleteFileId: num(r.delete_file_id),
              path: resolve(str(r.delete_path), r.delete_path_is_relative),
              format: str(r.delete_format),
              deleteCount: num(r.delete_count),
            },
      inlinedDeletes: deleted.get(num(r.data_file_id)) ?? [],
    };
  });
}

const sqlString = (text: string): string => `'${text.replace(/'/g, "''")}'`;

/**
 * The DuckDB query returning a table's rows from `files` and the rows inlined in the catalog (`inlined`, read in the
 * catalog's own database: the query must run where the catalog is the current database), with `columns` (top-level,
 * at the snapshot read) as the result's columns in order. Columns are matched to Parquet fields by field id
 * (= column_id, as the reference extension writes them), so a renamed column reads under its new name and a column
 * added later reads as its initial default in older files; an inlined table's columns are matched by name (its
 * columns are named as at its schema version). Rows listed in a file's positional delete file or in the catalog's
 * inlined deletes are left out; the delete file's other columns (file_path, extra ones) are ignored, as the
 * reference extension does.
 */
export function scanSql(
  table: LakeTable,
  columns: readonly LakeColumn[],
  files: readonly DataFile[],
  snapshot: number,
  inlined: readonly InlinedData[] = [],
): string {
  if (columns.length === 0) throw new DuckLakeError(`table ${table.name} has no columns at snapshot ${snapshot}`);
  const where = `table ${table.schema.name}.${table.name}`;
  const typed = columns.map((c) => ({ ...c, duckdbType: duckdbTypeOfTree(c, `${where}, column ${c.name}`) }));
  const select = typed.map((c) => ident(c.name)).join(', ');
  const defaultOf = (c: (typeof typed)[number]) => `CAST(${c.initialDefault === null ? 'NULL' : sqlString(c.initialDefault)} AS ${c.duckdbType})`;
  const parts: string[] = [];
  for (const t of inlined) {
    const has = new Set(t.columns);
    parts.push(
      `SELECT ${typed.map((c) => `${has.has(c.name) ? `CAST(${ident(c.name)} AS ${c.duckdbType})` : defaultOf(c)} AS ${ident(c.name)}`).join(', ')}
       FROM ${ident(t.name)} WHERE begin_snapshot <= ${snapshot} AND (end_snapshot IS NULL OR ${snapshot} < end_snapshot)`,
    );
  }
  if (files.length === 0) {
    return parts.length
      ? parts.join('\nUNION ALL\n')
      : `SELECT ${typed.map((c) => `${defaultOf({ ...c, initialDefault: null })} AS ${ident(c.name)}`).join(', ')} WHERE false`;
  }
  const schemaMap = `MAP {${typed
    .map(
      (c) =>
        `${c.columnId}: {name: ${sqlString(c.name)}, type: ${sqlString(c.duckdbType)}, default_value: ${
          c.initialDefault === null ? 'CAST(NULL AS VARCHAR)' : sqlString(c.initialDefault)
        }}`,
    )
    .join(', ')}}`;
  for (const f of files) checkReadable(f, where, snapshot);
  const whole = files.filter((f) => !f.deleteFile && f.inlinedDeletes.length === 0);
  if (whole.length) parts.unshift(`SELECT ${select} FROM read_parquet([${whole.map((f) => sqlString(f.path)).join(', ')}], schema = ${schemaMap})`);
  for (const f of files.filter((x) => x.deleteFile || x.inlinedDeletes.length)) {
    const deleted = [
      ...(f.deleteFile ? [`file_row_number NOT IN (SELECT pos FROM read_parquet(${sqlString(f.deleteFile.path)}))`] : []),
      ...(f.inlinedDeletes.length ? [`file_row_number NOT IN (${f.inlinedDeletes.join(', ')})`] : []),
    ];
    parts.push(
      `SELECT ${select} FROM read_parquet(${sqlString(f.path)}, schema = ${schemaMap}, file_row_number = true)
       WHERE ${deleted.join(' AND ')}`,
    );
  }
  return parts.join('\nUNION ALL\n');
}

/** Refuses a data file this reader cannot read as the spec says (name-mapped columns, rows of several snapshots, a delete file not in Parquet). */
function checkReadable(f: DataFile, where: string, snapshot: number): void {
  if (f.mappingId !== null) {
    throw new DuckLakeError(`${where}: data file ${f.dataFileId} maps columns by name (mapping_id ${f.mappingId}); chainlake reads field-id files only`);
  }
  if (f.partialMax !== null && snapshot < f.partialMax) {
    throw new DuckLakeError(
      `${where}: data file ${f.dataFileId} holds rows of several snapshots (partial_max ${f.partialMax}); reading it at ${snapshot} is not supported`,
    );
  }
  if (f.deleteFile && f.deleteFile.format !== 'parquet') {
    throw new DuckLakeError(
      `${where}: delete file ${f.deleteFile.deleteFileId} has format '${f.deleteFile.format}'; chainlake reads parquet delete files only`,
    );
  }
}

export interface TableScan {
  readonly snapshot: Snapshot;
  readonly table: LakeTable;
  readonly columns: LakeColumn[];
  readonly files: DataFile[];
  /** The table's inlined-data tables (their rows at `snapshot` are part of the scan). */
  readonly inlined: InlinedData[];
  /** DuckDB SQL returning the table's rows at `snapshot`; run it on any DuckDB connection that can read the files. */
  readonly sql: string;
}

/** Everything needed to read one table at a snapshot: resolves the snapshot, the table, its columns and files. */
export async function planScan(
  db: CatalogDb,
  tableName: string,
  opts: { asOf?: AsOf; schema?: string; dataPath?: string; engine?: { conn: DuckDBConnection; prefix: string } } = {},
): Promise<TableScan> {
  const dataPath = await dataPathOf(db, opts.dataPath);
  if (opts.dataPath !== undefined) await checkVersion(db);
  const snapshot = await resolveSnapshot(db, opts.asOf);
  const table = await findTable(db, snapshot.snapshotId, tableName, opts.schema);
  const columns = await listColumns(db, table.tableId, snapshot.snapshotId);
  const files = await listDataFiles(db, table, snapshot.snapshotId, dataPath);
  let inlined = await listInlinedData(db, table);
  // The scan runs in DuckDB, which cannot name a PostgreSQL catalog's inlined tables: without a row valid at the
  // snapshot (all ended by a later commit, or none yet) they are left out of the scan.
  if (db.dialect !== 'duckdb' && !(await hasInlinedRows(db, inlined, snapshot.snapshotId))) inlined = [];
  if (db.dialect !== 'duckdb' && inlined.length > 0) {
    // The scan runs in DuckDB, which reaches a PostgreSQL catalog's tables only through copies on its connection.
    if (!opts.engine) {
      throw new DuckLakeError(
        `table ${table.schema.name}.${table.name} has rows another writer inlined into the PostgreSQL catalog: reading it needs the DuckDB connection the scan runs on`,
      );
    }
    const copied = await inlinedRowsFor(db, opts.engine.conn, table, columns, snapshot.snapshotId, { prefix: opts.engine.prefix, temporary: false });
    inlined = copied.inlined;
  }
  return { snapshot, table, columns, files, inlined, sql: scanSql(table, columns, files, snapshot.snapshotId, inlined) };
}
