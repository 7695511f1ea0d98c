import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { expect } from 'vitest';

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

/**
 * A digest of a dataset's rows, without the columns that say when a row was fetched (run ids, and the
 * API's `confirmations`, which counts from the head at fetch time), after checking one row per key.
 */
export async function datasetDigest(lake: string, dataset: string, key: string): Promise<{ rows: number; digest: string }> {
  const cols = (await queryCatalog(lake, `DESCRIBE ${dataset}`)).map((r) => String(r.column_name));
  const volatile = ['_run_id', '_ingested_at', 'confirmations'].filter((c) => cols.includes(c));
  const rows = await queryCatalog(lake, `SELECT * EXCLUDE (${volatile.join(', ')}) FROM ${dataset} ORDER BY ALL`);
  expect(rows.length).toBeGreaterThan(0);
  const keys = new Set(rows.map((r) => `${String(r[key])}/${String(r.ordinal ?? '')}`));
  expect(keys.size, `${dataset}: one row per key`).toBe(rows.length);
  const text = JSON.stringify(rows, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  return { rows: rows.length, digest: createHash('sha256').update(text).digest('hex') };
}
