/**
 * The DuckLake 1.0 catalog: the 28 metadata tables, column for column as in the spec's creation script
 * (ducklake-web `docs/stable/specification/tables/overview.md`) and in the catalogs the reference extension writes
 * (`fixtures/old_ducklake/v04.db`), and the rows a new catalog starts with.
 *
 * Types are the ones DuckDB and PostgreSQL both name the same way (BIGINT, VARCHAR, BOOLEAN, UUID, TIMESTAMPTZ), so
 * the same statements create the catalog on both; `ducklake_metadata`'s NOT NULLs and the five primary keys are
 * the spec's only constraints.
 */
import { randomBytes } from 'node:crypto';
import type { CatalogDb, CatalogValue, Dialect } from './catalog-db.js';
import { DuckLakeError } from './catalog-db.js';

export const DUCKLAKE_VERSION = '1.0';
export const CREATED_BY = 'chainlake';

export type CatalogColumnType = 'BIGINT' | 'VARCHAR' | 'BOOLEAN' | 'UUID' | 'TIMESTAMPTZ';

export interface CatalogColumn {
  readonly name: string;
  readonly type: CatalogColumnType;
  readonly notNull?: boolean;
}

export interface CatalogTable {
  readonly name: string;
  readonly columns: readonly CatalogColumn[];
  readonly primaryKey?: string;
}

const col = (spec: string): CatalogColumn[] =>
  spec.split(',').map((part) => {
    const [name, type, notNull] = part.trim().split(/\s+/) as [string, CatalogColumnType, string?];
    return notNull === 'NOTNULL' ? { name, type, notNull: true } : { name, type };
  });

/** All 28 tables of the 1.0 layout, in the order the reference extension creates them. */
export const DUCKLAKE_TABLES: readonly CatalogTable[] = [
  { name: 'ducklake_metadata', columns: col('key VARCHAR NOTNULL, value VARCHAR NOTNULL, scope VARCHAR, scope_id BIGINT') },
  {
    name: 'ducklake_snapshot',
    primaryKey: 'snapshot_id',
    columns: col('snapshot_id BIGINT, snapshot_time TIMESTAMPTZ, schema_version BIGINT, next_catalog_id BIGINT, next_file_id BIGINT'),
  },
  {
    name: 'ducklake_snapshot_changes',
    primaryKey: 'snapshot_id',
    columns: col('snapshot_id BIGINT, changes_made VARCHAR, author VARCHAR, commit_message VARCHAR, commit_extra_info VARCHAR'),
  },
  {
    name: 'ducklake_schema',
    primaryKey: 'schema_id',
    columns: col('schema_id BIGINT, schema_uuid UUID, begin_snapshot BIGINT, end_snapshot BIGINT, schema_name VARCHAR, path VARCHAR, path_is_relative BOOLEAN'),
  },
  {
    name: 'ducklake_table',
    columns: col(
      'table_id BIGINT, table_uuid UUID, begin_snapshot BIGINT, end_snapshot BIGINT, schema_id BIGINT, table_name VARCHAR, path VARCHAR, path_is_relative BOOLEAN',
    ),
  },
  {
    name: 'ducklake_view',
    columns: col(
      'view_id BIGINT, view_uuid UUID, begin_snapshot BIGINT, end_snapshot BIGINT, schema_id BIGINT, view_name VARCHAR, dialect VARCHAR, sql VARCHAR, column_aliases VARCHAR',
    ),
  },
  { name: 'ducklake_tag', columns: col('object_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, key VARCHAR, value VARCHAR') },
  {
    name: 'ducklake_column_tag',
    columns: col('table_id BIGINT, column_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, key VARCHAR, value VARCHAR'),
  },
  {
    name: 'ducklake_data_file',
    primaryKey: 'data_file_id',
    columns: col(
      'data_file_id BIGINT, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, file_order BIGINT, path VARCHAR, path_is_relative BOOLEAN, file_format VARCHAR, record_count BIGINT, file_size_bytes BIGINT, footer_size BIGINT, row_id_start BIGINT, partition_id BIGINT, encryption_key VARCHAR, mapping_id BIGINT, partial_max BIGINT',
    ),
  },
  {
    name: 'ducklake_file_column_stats',
    columns: col(
      'data_file_id BIGINT, table_id BIGINT, column_id BIGINT, column_size_bytes BIGINT, value_count BIGINT, null_count BIGINT, min_value VARCHAR, max_value VARCHAR, contains_nan BOOLEAN, extra_stats VARCHAR',
    ),
  },
  {
    name: 'ducklake_file_variant_stats',
    columns: col(
      'data_file_id BIGINT, table_id BIGINT, column_id BIGINT, variant_path VARCHAR, shredded_type VARCHAR, column_size_bytes BIGINT, value_count BIGINT, null_count BIGINT, min_value VARCHAR, max_value VARCHAR, contains_nan BOOLEAN, extra_stats VARCHAR',
    ),
  },
  {
    name: 'ducklake_delete_file',
    primaryKey: 'delete_file_id',
    columns: col(
      'delete_file_id BIGINT, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, data_file_id BIGINT, path VARCHAR, path_is_relative BOOLEAN, format VARCHAR, delete_count BIGINT, file_size_bytes BIGINT, footer_size BIGINT, encryption_key VARCHAR, partial_max BIGINT',
    ),
  },
  {
    name: 'ducklake_column',
    columns: col(
      'column_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, table_id BIGINT, column_order BIGINT, column_name VARCHAR, column_type VARCHAR, initial_default VARCHAR, default_value VARCHAR, nulls_allowed BOOLEAN, parent_column BIGINT, default_value_type VARCHAR, default_value_dialect VARCHAR',
    ),
  },
  { name: 'ducklake_table_stats', columns: col('table_id BIGINT, record_count BIGINT, next_row_id BIGINT, file_size_bytes BIGINT') },
  {
    name: 'ducklake_table_column_stats',
    columns: col('table_id BIGINT, column_id BIGINT, contains_null BOOLEAN, contains_nan BOOLEAN, min_value VARCHAR, max_value VARCHAR, extra_stats VARCHAR'),
  },
  { name: 'ducklake_partition_info', columns: col('partition_id BIGINT, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT') },
  { name: 'ducklake_partition_column', columns: col('partition_id BIGINT, table_id BIGINT, partition_key_index BIGINT, column_id BIGINT, transform VARCHAR') },
  { name: 'ducklake_file_partition_value', columns: col('data_file_id BIGINT, table_id BIGINT, partition_key_index BIGINT, partition_value VARCHAR') },
  { name: 'ducklake_files_scheduled_for_deletion', columns: col('data_file_id BIGINT, path VARCHAR, path_is_relative BOOLEAN, schedule_start TIMESTAMPTZ') },
  { name: 'ducklake_inlined_data_tables', columns: col('table_id BIGINT, table_name VARCHAR, schema_version BIGINT') },
  { name: 'ducklake_column_mapping', columns: col('mapping_id BIGINT, table_id BIGINT, type VARCHAR') },
  {
    name: 'ducklake_name_mapping',
    columns: col('mapping_id BIGINT, column_id BIGINT, source_name VARCHAR, target_field_id BIGINT, parent_column BIGINT, is_partition BOOLEAN'),
  },
  { name: 'ducklake_schema_versions', columns: col('begin_snapshot BIGINT, schema_version BIGINT, table_id BIGINT') },
  { name: 'ducklake_macro', columns: col('schema_id BIGINT, macro_id BIGINT, macro_name VARCHAR, begin_snapshot BIGINT, end_snapshot BIGINT') },
  { name: 'ducklake_macro_impl', columns: col('macro_id BIGINT, impl_id BIGINT, dialect VARCHAR, sql VARCHAR, type VARCHAR') },
  {
    name: 'ducklake_macro_parameters',
    columns: col(
      'macro_id BIGINT, impl_id BIGINT, column_id BIGINT, parameter_name VARCHAR, parameter_type VARCHAR, default_value VARCHAR, default_value_type VARCHAR',
    ),
  },
  { name: 'ducklake_sort_info', columns: col('sort_id BIGINT, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT') },
  {
    name: 'ducklake_sort_expression',
    columns: col('sort_id BIGINT, table_id BIGINT, sort_key_index BIGINT, expression VARCHAR, dialect VARCHAR, sort_direction VARCHAR, null_order VARCHAR'),
  },
];

/** Quotes an identifier; the spec quotes key, value, scope, sql, type and transform, and quoting all is harmless. */
export const ident = (name: string): string => `"${name.replace(/"/g, '""')}"`;

/**
 * The CREATE TABLE statements of a new catalog. `schema` (PostgreSQL: a schema such as `ducklake`; DuckDB: an
 * attached database or schema) prefixes every table when given. The text is the same for both dialects: every type
 * used is spelled alike in DuckDB and PostgreSQL.
 */
export function ddlStatements(_dialect: Dialect, schema?: string): string[] {
  const prefix = schema ? `${ident(schema)}.` : '';
  return DUCKLAKE_TABLES.map((table) => {
    const columns = table.columns.map((c) => {
      const constraint = table.primaryKey === c.name ? ' PRIMARY KEY' : c.notNull ? ' NOT NULL' : '';
      return `${ident(c.name)} ${c.type}${constraint}`;
    });
    return `CREATE TABLE ${prefix}${ident(table.name)} (${columns.join(', ')})`;
  });
}

/** A version 7 UUID (time-ordered), as the reference extension uses for tables and file names. */
export function uuidv7(now = Date.now()): string {
  const bytes = randomBytes(16);
  const ms = BigInt(now);
  for (let i = 0; i < 6; i++) bytes[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
  bytes[6] = (bytes[6]! & 0x0f) | 0x70;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export interface InitOptions {
  /** Where data files live: a directory path or `s3://bucket/prefix`; stored with a trailing `/` as the spec asks. */
  readonly dataPath: string;
  /** The `created_by` metadata value; defaults to `chainlake`. */
  readonly createdBy?: string;
  /** Extra global metadata keys (e.g. `data_inlining_row_limit`). */
  readonly metadata?: Readonly<Record<string, string>>;
}

/** The `data_path` as stored: with a trailing separator (the spec: "Has to end in /"). */
export function normaliseDataPath(dataPath: string): string {
  if (!dataPath) throw new DuckLakeError('the DuckLake data path is empty');
  return dataPath.endsWith('/') ? dataPath : `${dataPath}/`;
}

/**
 * Creates the 28 tables and the rows the reference extension writes into a new catalog (InitializeDuckLake):
 * snapshot 0 (schema_version 0, next_catalog_id 1, next_file_id 0) with change `created_schema:"main"`, schema 0
 * `main` at the relative path `main/`, and the metadata keys version, created_by, data_path, encrypted. One
 * transaction: a half-created catalog is never left behind.
 */
export async function initialiseCatalog(db: CatalogDb, options: InitOptions): Promise<void> {
  await db.transaction(async (tx) => {
    for (const statement of ddlStatements(tx.dialect)) await tx.query(statement);
    await tx.query(`INSERT INTO ducklake_snapshot VALUES (0, NOW(), 0, 1, 0)`);
    await tx.query(`INSERT INTO ducklake_snapshot_changes VALUES (0, 'created_schema:"main"', NULL, NULL, NULL)`);
    const metadata: [string, string][] = [
      ['version', DUCKLAKE_VERSION],
      ['created_by', options.createdBy ?? CREATED_BY],
      ['data_path', normaliseDataPath(options.dataPath)],
      ['encrypted', 'false'],
      ...Object.entries(options.metadata ?? {}),
    ];
    for (const [key, value] of metadata) {
      await tx.query(`INSERT INTO ducklake_metadata (${ident('key')}, ${ident('value')}) VALUES ($1, $2)`, [key, value]);
    }
    const params: CatalogValue[] = [uuidv7()];
    await tx.query(`INSERT INTO ducklake_schema VALUES (0, $1, 0, NULL, 'main', 'main/', true)`, params);
  });
}

/** Reads the global metadata keys (scope NULL). */
export async function readMetadata(db: CatalogDb): Promise<Map<string, string>> {
  const rows = await db.query(`SELECT ${ident('key')} AS k, ${ident('value')} AS v FROM ducklake_metadata WHERE ${ident('scope')} IS NULL`);
  return new Map(rows.map((r) => [String(r.k), String(r.v)]));
}

/** Refuses a catalog of another format version: its tables may differ from the 1.0 layout this module reads. */
export async function checkVersion(db: CatalogDb): Promise<Map<string, string>> {
  const metadata = await readMetadata(db);
  const version = metadata.get('version');
  if (version !== DUCKLAKE_VERSION) {
    throw new DuckLakeError(
      `DuckLake catalog version mismatch: the catalog says version ${version ?? '(none)'}, chainlake reads and writes ${DUCKLAKE_VERSION} only`,
    );
  }
  return metadata;
}
