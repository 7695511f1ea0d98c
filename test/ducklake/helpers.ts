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
