import { createHash } from 'node:crypto';
import { accessSync, constants, statfsSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { expect } from 'vitest';
import { literal } from '../../src/load/sql.js';

let testTmp: string | undefined;

/** Free space /dev/shm must have to be used: the whole suite's temp files at once, with room to spare. */
const SHM_NEEDED_BYTES = 4 * 2 ** 30;

/**
 * Where tests' temp directories go: CHAINLAKE_TEST_TMPDIR if set, else a file system in memory where the machine
 * has one (Linux's /dev/shm), else the system's temp directory. The files are as real in memory as on disk (a killed
 * process's writes survive in either); what a disk adds is the wait for its fsyncs, which a test's process sat out
 * idle: each commit's catalog checkpoint (Catalog.hold closing its DuckDB) took a small run from 420-490 ms to
 * 600-690 ms wall for the same CPU.
 */
function testTmpDir(): string {
  if (testTmp === undefined) {
    const asked = process.env.CHAINLAKE_TEST_TMPDIR;
    let shm = false;
    try {
      accessSync('/dev/shm', constants.W_OK);
      // A container's /dev/shm is often 64 MB: too small for the suite's lakes, which would fail for want of space.
      const fs = statfsSync('/dev/shm');
      shm = statSync('/dev/shm').isDirectory() && fs.bavail * fs.bsize >= SHM_NEEDED_BYTES;
    } catch {
      shm = false;
    }
    testTmp = asked || (shm ? '/dev/shm' : os.tmpdir());
  }
  return testTmp;
}

/** A fresh temp directory (see testTmpDir); removed by the returned cleanup. */
export async function tempDir(prefix = 'chainlake-test-'): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(testTmpDir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** One in-memory DuckDB per test process, into which each queryCatalog attaches the catalog it reads. */
let reader: Promise<DuckDBInstance> | undefined;
/** queryCatalog's calls, one after another: one instance cannot attach one file twice at once. */
let queue: Promise<unknown> = Promise.resolve();

/**
 * Runs SQL against a lake's catalog read-only, as a user's DuckDB would, and returns JS rows. The catalog is
 * attached read-only for the call and detached after it (as opening it read-only would, it holds a shared lock
 * only meanwhile); attaching to one instance kept for the process costs about half of opening an instance on the
 * file each time, in a suite that reads catalogs some hundreds of times.
 */
export function queryCatalog(lake: string, sql: string): Promise<Record<string, unknown>[]> {
  const run = queue.then(async () => {
    const instance = await (reader ??= DuckDBInstance.create(':memory:'));
    const conn = await instance.connect();
    try {
      await conn.run("SET TimeZone = 'UTC'");
      await conn.run(`ATTACH ${literal(path.join(lake, 'catalog.duckdb'))} AS lake_catalog (READ_ONLY)`);
      try {
        await conn.run('USE lake_catalog');
        return (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[];
      } finally {
        await conn.run('USE memory');
        await conn.run('DETACH lake_catalog');
      }
    } finally {
      conn.closeSync();
    }
  });
  queue = run.catch(() => undefined);
  return run;
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
