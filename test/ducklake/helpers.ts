import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { DuckDbCatalog } from '../../src/ducklake/catalog-db.js';

/** The reference extension's catalogs and Parquet files, copied into the repo (see fixtures/README.md). */
export const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');

export async function tempDir(): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'chainlake-ducklake-'));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Gunzips fixture `rel` (e.g. `old_ducklake/v04.db.gz`) into `dir` and returns the file's path. */
export async function gunzipFixture(rel: string, dir: string): Promise<string> {
  const target = path.join(dir, path.basename(rel, '.gz'));
  await writeFile(target, gunzipSync(await readFile(path.join(FIXTURES, rel))));
  return target;
}

export interface OpenCatalog {
  instance: DuckDBInstance;
  /** The connection whose default catalog is the DuckLake catalog database. */
  conn: DuckDBConnection;
  catalog: DuckDbCatalog;
  /** A new connection on the same database (for concurrent readers and data queries). */
  connect(): Promise<DuckDBConnection>;
  close(): void;
}

/**
 * Opens a DuckDB file as the DuckLake catalog, attached as `cat` in an in-memory instance and made the default, so
 * the same instance can also run the data queries (read_parquet) and attach other catalogs to compare with.
 */
export async function openCatalogFile(file: string, opts: { readOnly?: boolean } = {}): Promise<OpenCatalog> {
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  await conn.run(`ATTACH '${file.replace(/'/g, "''")}' AS cat${opts.readOnly ? ' (READ_ONLY)' : ''}`);
  await conn.run('USE cat');
  await conn.run("SET TimeZone = 'UTC'");
  const opened: DuckDBConnection[] = [conn];
  return {
    instance,
    conn,
    catalog: new DuckDbCatalog(conn),
    async connect() {
      const c = await instance.connect();
      await c.run('USE cat');
      await c.run("SET TimeZone = 'UTC'");
      opened.push(c);
      return c;
    },
    close() {
      for (const c of opened) c.closeSync();
      instance.closeSync();
    },
  };
}

/**
 * Brings a reference-extension catalog of version 0.3 or 0.4 to 1.0 the way the extension's own migrations do
 * (MigrateV03 then MigrateV04 of duckdb/ducklake v1.5-variegata `src/storage/ducklake_metadata_manager.cpp`,
 * the statements this module's tables need), on a writable copy.
 */
export async function migrateToV10(conn: DuckDBConnection): Promise<void> {
  const version = String((await conn.runAndReadAll(`SELECT "value" FROM ducklake_metadata WHERE "key" = 'version'`)).getRowObjectsJS()[0]?.value);
  if (version === '0.3') {
    await conn.run(`
      CREATE TABLE IF NOT EXISTS ducklake_macro(schema_id BIGINT, macro_id BIGINT, macro_name VARCHAR, begin_snapshot BIGINT, end_snapshot BIGINT);
      CREATE TABLE IF NOT EXISTS ducklake_macro_impl(macro_id BIGINT, impl_id BIGINT, dialect VARCHAR, sql VARCHAR, type VARCHAR);
      CREATE TABLE IF NOT EXISTS ducklake_macro_parameters(macro_id BIGINT, impl_id BIGINT,column_id BIGINT, parameter_name VARCHAR, parameter_type VARCHAR, default_value VARCHAR, default_value_type VARCHAR);
      ALTER TABLE ducklake_column ADD COLUMN IF NOT EXISTS default_value_type VARCHAR DEFAULT 'literal';
      UPDATE ducklake_column SET default_value_type = 'literal' WHERE default_value_type IS NULL;
      ALTER TABLE ducklake_column ADD COLUMN IF NOT EXISTS default_value_dialect VARCHAR DEFAULT NULL;
      CREATE TABLE IF NOT EXISTS ducklake_sort_info(sort_id BIGINT, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT);
      CREATE TABLE IF NOT EXISTS ducklake_sort_expression(sort_id BIGINT, table_id BIGINT, sort_key_index BIGINT, expression VARCHAR, dialect VARCHAR, sort_direction VARCHAR, null_order VARCHAR);
      CREATE TABLE IF NOT EXISTS ducklake_file_variant_stats(data_file_id BIGINT, table_id BIGINT, column_id BIGINT, variant_path VARCHAR, shredded_type VARCHAR, column_size_bytes BIGINT, value_count BIGINT, null_count BIGINT, min_value VARCHAR, max_value VARCHAR, contains_nan BOOLEAN, extra_stats VARCHAR);
      ALTER TABLE ducklake_schema_versions ADD COLUMN IF NOT EXISTS table_id BIGINT;
      ALTER TABLE ducklake_data_file ADD COLUMN IF NOT EXISTS partial_max BIGINT;
      ALTER TABLE ducklake_delete_file ADD COLUMN IF NOT EXISTS partial_max BIGINT;
      CREATE TEMP TABLE __ducklake_partial_max_migration AS
        SELECT data_file_id, TRY_CAST(regexp_extract(partial_file_info, 'partial_max:(\\d+)', 1) AS BIGINT) AS partial_max
        FROM ducklake_data_file WHERE partial_file_info IS NOT NULL AND partial_file_info LIKE '%partial_max:%';
      ALTER TABLE ducklake_data_file DROP COLUMN IF EXISTS partial_file_info;
      UPDATE ducklake_data_file AS df SET partial_max = m.partial_max FROM __ducklake_partial_max_migration m WHERE df.data_file_id = m.data_file_id;
      DROP TABLE IF EXISTS __ducklake_partial_max_migration;
      INSERT INTO ducklake_schema_versions (table_id, begin_snapshot, schema_version)
        SELECT t.table_id, sv.begin_snapshot, sv.schema_version FROM ducklake_schema_versions sv
        JOIN ducklake_table t ON sv.begin_snapshot BETWEEN t.begin_snapshot AND COALESCE(t.end_snapshot, sv.begin_snapshot)
        WHERE sv.table_id IS NULL;
      DELETE FROM ducklake_schema_versions WHERE table_id IS NULL;
      UPDATE ducklake_metadata SET "value" = '0.4' WHERE "key" = 'version';`);
  } else if (version !== '0.4' && version !== '0.4-dev1') {
    // 0.4-dev1 catalogs written after partial_file_info was dropped (v04-dev1_types) already have the 1.0 layout.
    throw new Error(`migrateToV10: catalog version ${version} is not 0.3 or 0.4`);
  }
  await conn.run(`UPDATE ducklake_metadata SET "value" = '1.0' WHERE "key" = 'version'`);
}

/** The reference DuckLake extension built for this DuckDB (../shared/ducklake-ref/README.md), beside the worktree. */
export const REFERENCE_DIR = path.resolve(FIXTURES, '../../../../shared/ducklake-ref');
const REFERENCE_FILES = ['ducklake.duckdb_extension', 'postgres_scanner.duckdb_extension'];

/** Why the reference extension cannot be used here, or null when its files are present (never downloaded). */
export function referenceMissing(): string | null {
  const missing = REFERENCE_FILES.filter((f) => !existsSync(path.join(REFERENCE_DIR, f)));
  return missing.length ? `skipped: the reference extension is missing (${missing.map((f) => path.join(REFERENCE_DIR, f)).join(', ')})` : null;
}

/** How the reference extension attaches a lake (see openReference). */
export interface ReferenceOptions {
  write?: boolean;
  inlining?: number;
  /** The lake's name in statements (default `ref`). */
  as?: string;
  /**
   * Where this DuckDB finds the lake's files instead of the catalog's data path (OVERRIDE_DATA_PATH, which leaves
   * the catalog's as it is): a lake on object storage, without the httpfs extension, through a local copy.
   */
  dataPath?: string;
}

/**
 * A DuckDB with the reference `ducklake` extension, the lake attached read-only as `ref` (or `as`) and in use:
 * `catalog` is a DuckDB file, or a PostgreSQL URL (`postgres://user@host:port/db`, its password from PGPASSWORD) whose
 * catalog is in the `ducklake` schema, read through the reference `postgres_scanner`. `write`: attached read-write, as
 * a user's DuckDB writing into the lake (`inlining`: its DATA_INLINING_ROW_LIMIT, else the extension's default).
 */
export async function openReference(catalog: string, opts: ReferenceOptions = {}): Promise<{ conn: DuckDBConnection; close(): void }> {
  const instance = await DuckDBInstance.create(':memory:', REFERENCE_CONFIG);
  const conn = await attachReference(instance, catalog, opts).catch((error: unknown) => {
    instance.closeSync();
    throw error;
  });
  return {
    conn,
    close() {
      conn.closeSync();
      instance.closeSync();
    },
  };
}

const REFERENCE_CONFIG = { allow_unsigned_extensions: 'true', autoinstall_known_extensions: 'false' };

/** A new connection of `instance` with the reference extension loaded and the lake of `catalog` attached and in use (see openReference). */
async function attachReference(instance: DuckDBInstance, catalog: string, opts: ReferenceOptions): Promise<DuckDBConnection> {
  const as = opts.as ?? 'ref';
  const conn = await instance.connect();
  const quote = (s: string) => `'${s.replace(/'/g, "''")}'`;
  const options =
    (opts.write ? (opts.inlining === undefined ? '' : `, DATA_INLINING_ROW_LIMIT ${opts.inlining}`) : ', READ_ONLY') +
    (opts.dataPath === undefined ? '' : `, DATA_PATH ${quote(opts.dataPath)}, OVERRIDE_DATA_PATH true`);
  try {
    await conn.run("SET TimeZone = 'UTC'");
    await conn.run(`LOAD ${quote(path.join(REFERENCE_DIR, 'ducklake.duckdb_extension'))}`);
    if (/^postgres(ql)?:\/\//.test(catalog)) {
      await conn.run(`LOAD ${quote(path.join(REFERENCE_DIR, 'postgres_scanner.duckdb_extension'))}`);
      const url = new URL(catalog);
      const dsn = `dbname=${url.pathname.slice(1)} host=${url.hostname} port=${url.port} user=${decodeURIComponent(url.username)}`;
      await conn.run(`ATTACH ${quote(`ducklake:postgres:${dsn}`)} AS ${as} (METADATA_SCHEMA 'ducklake'${options})`);
    } else {
      await conn.run(`ATTACH ${quote(`ducklake:${catalog}`)} AS ${as}${options ? ` (${options.slice(2)})` : ''}`);
    }
    await conn.run(`USE ${as}`);
  } catch (error) {
    conn.closeSync();
    throw error;
  }
  return conn;
}

/**
 * DuckDB instances withReference used, each with nothing attached: the next call attaches its lake to one of them
 * instead of creating an instance (and closing it after), a fifth of the cost of a call on a small PostgreSQL lake
 * (create 20-85 ms, close 55-140 ms of 550-1,000 ms at load 8-10). What a call saw is gone with its connection and
 * its detached databases: each call attaches the lake afresh, as a separate writer's DuckDB would.
 */
const idleReferences: DuckDBInstance[] = [];
const IDLE_REFERENCES_KEPT = 2;
/** Nor what a call read: no file contents cached across calls (DuckDB's external file cache is per instance). */
const KEPT_REFERENCE_CONFIG = { ...REFERENCE_CONFIG, enable_external_file_cache: 'false' };

/** Detaches every database `conn`'s instance has attached and keeps the instance for the next call, or closes it. */
async function releaseReference(instance: DuckDBInstance, conn: DuckDBConnection): Promise<void> {
  try {
    await conn.run('USE memory');
    const attached = async () =>
      (
        (await conn.runAndReadAll(`SELECT database_name FROM duckdb_databases() WHERE NOT internal AND database_name <> 'memory'`)).getRowsJS() as [string][]
      ).map(([name]) => name);
    // The lake first: a DuckLake's metadata database goes with it.
    for (const name of (await attached()).sort((a, b) => Number(a.startsWith('__ducklake_metadata_')) - Number(b.startsWith('__ducklake_metadata_'))))
      await conn.run(`DETACH DATABASE IF EXISTS "${name.replace(/"/g, '""')}"`);
    if ((await attached()).length > 0 || idleReferences.length >= IDLE_REFERENCES_KEPT) throw new Error('not kept');
    conn.closeSync();
    idleReferences.push(instance);
  } catch {
    conn.closeSync();
    instance.closeSync();
  }
}

/**
 * Another DuckLake writer at work on the lake of `catalog`: `work`'s statements run through the reference extension
 * (openReference, read-write) and the last one's rows returned, or `work` given the connection.
 */
export async function withReference<T = Record<string, unknown>[]>(
  catalog: string,
  work: readonly string[] | ((conn: DuckDBConnection) => Promise<T>),
  opts: Omit<ReferenceOptions, 'write'> = {},
): Promise<T> {
  const instance = idleReferences.pop() ?? (await DuckDBInstance.create(':memory:', KEPT_REFERENCE_CONFIG));
  let conn: DuckDBConnection;
  try {
    conn = await attachReference(instance, catalog, { ...opts, write: true });
  } catch (error) {
    instance.closeSync();
    throw error;
  }
  try {
    if (typeof work === 'function') return await work(conn);
    let last: Record<string, unknown>[] = [];
    for (const sql of work) last = (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[];
    return last as T;
  } finally {
    await releaseReference(instance, conn);
  }
}
