import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';

/** A fresh temp directory; removed by the returned cleanup. */
export async function tempDir(prefix = 'chainlake-test-'): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Runs SQL against a lake's catalog read-only, as a user's DuckDB would, and returns JS rows. */
export async function queryCatalog(lake: string, sql: string): Promise<Record<string, unknown>[]> {
  const instance = await DuckDBInstance.create(path.join(lake, 'catalog.duckdb'), { access_mode: 'READ_ONLY' });
  try {
    const conn = await instance.connect();
    try {
      await conn.run("SET TimeZone = 'UTC'");
      return (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[];
    } finally {
      conn.closeSync();
    }
  } finally {
    instance.closeSync();
  }
}
