import { spawnSync } from 'node:child_process';
import { cp, readFile, rename, stat } from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { tableFromIPC } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { CLI, runCliCapturing, type CliResult } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';
import { lockDown, unprivileged, unprivilegedCanRun } from '../helpers/permissions.js';

/** `chainlake query` writing results of any size: --output, --format csv|json|arrow|parquet|table, closed pipes, read-only lakes. */

/**
 * A command in this process, as the bin runs it (test/helpers/cli.ts runCliCapturing: what it prints, every byte it
 * writes, the exit code it decides), with `env` over this process's environment for the call (no API key or URL
 * unless given, as a child of runCli). The output and exit code are the point here, not the process: Arrow bytes on
 * stdout, a closed pipe and a read-only lake as another user keep their child.
 */
const runCli = (args: string[], opts: { env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> =>
  runCliCapturing(args, { CHAINLAKE_API_KEY: '', CHAINLAKE_MAINNET_URL: '', ...opts.env });

let sim: RunningSimulator;
let dir: string;
let lake: string;
let cleanup: () => Promise<void>;
let rows: number;

beforeAll(async () => {
  sim = await startSimulator({ seed: 5 });
  ({ dir, cleanup } = await tempDir('chainlake-query-'));
  lake = path.join(dir, 'lake');
  const env = { CHAINLAKE_MAINNET_URL: sim.urls.mainnet, CHAINLAKE_API_KEY: sim.apiKey };
  const r = await runCli(['export', 'transactions', '--address', sim.examples.addresses[0]!, '--lake', lake, '-q'], { env });
  expect(r.code, r.stderr).toBe(0);
  const n = await runCli(['query', '--lake', lake, '--format', 'csv', 'SELECT count(*) AS n FROM transactions']);
  rows = Number(n.stdout.trim().split('\n')[1]);
  expect(rows).toBeGreaterThan(50);
});

afterAll(async () => {
  await sim?.close();
  if (dir) await lockDown(path.join(dir, 'moved'), 0o755).catch(() => undefined);
  await cleanup?.();
});

async function readParquet(file: string, sql: string): Promise<Record<string, unknown>[]> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    return (await conn.runAndReadAll(sql.replace('$file', `'${file}'`))).getRowObjectsJS() as Record<string, unknown>[];
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

describe('chainlake query --output / --format', () => {
  it('streams CSV and JSON lines into a file', async () => {
    const csv = path.join(dir, 'r.csv');
    const r = await runCli(['query', '--lake', lake, '--format', 'csv', '--output', csv, 'SELECT range AS i, range * 2 AS j FROM range(5000)']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('');
    const lines = (await readFile(csv, 'utf8')).trimEnd().split('\n');
    expect(lines).toHaveLength(5001);
    expect(lines[0]).toBe('i,j');
    expect(lines[5000]).toBe('4999,9998');

    const json = path.join(dir, 'r.json');
    const j = await runCli(['query', '--lake', lake, '--format', 'json', '-o', json, 'SELECT transaction_hash, block_number FROM transactions']);
    expect(j.code, j.stderr).toBe(0);
    const objects = (await readFile(json, 'utf8'))
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(objects).toHaveLength(rows);
    expect(Object.keys(objects[0]!)).toEqual(['transaction_hash', 'block_number']);
  });

  it('writes each column as one JSON type: integers as numbers with every digit, JSON columns nested', async () => {
    const sql =
      "SELECT 42::BIGINT AS a, 9007199254740993::BIGINT AS b, (-7)::HUGEINT AS c, 5::UBIGINT AS d, 'x' AS e, NULL::BIGINT AS f, '{\"k\":[1,2]}'::JSON AS g, NULL::JSON AS h";
    const r = await runCli(['query', '--lake', lake, '--format', 'json', sql]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('{"a":42,"b":9007199254740993,"c":-7,"d":5,"e":"x","f":null,"g":{"k":[1,2]},"h":null}\n');
    // A column whose values straddle 2^53 keeps one type from row to row.
    const mixed = await runCli(['query', '--lake', lake, '--format', 'json', 'SELECT v FROM (VALUES (1::BIGINT), (9223372036854775807::BIGINT)) t(v)']);
    expect(mixed.stdout).toBe('{"v":1}\n{"v":9223372036854775807}\n');
    const types = mixed.stdout
      .trimEnd()
      .split('\n')
      .map((l) => typeof (JSON.parse(l) as { v: unknown }).v);
    expect(types).toEqual(['number', 'number']);
  });

  it('writes an Arrow IPC stream with the lake types, to a file or stdout', async () => {
    const file = path.join(dir, 'r.arrows');
    const r = await runCli(['query', '--lake', lake, '--format', 'arrow', '-o', file, 'SELECT * FROM transactions ORDER BY transaction_hash']);
    expect(r.code, r.stderr).toBe(0);
    const table = tableFromIPC(await readFile(file));
    expect(table.numRows).toBe(rows);
    const types = Object.fromEntries(table.schema.fields.map((f) => [f.name, String(f.type)]));
    expect(types).toMatchObject({
      block_number: 'Int64',
      value: 'Decimal[38e0]',
      timestamp: 'Timestamp<MICROSECOND, UTC>',
      tx_status: 'Bool',
      block_date: 'Date32<DAY>',
      transaction_hash: 'Utf8',
    });
    // stdout carries the same bytes (a pipe into pyarrow or Polars).
    const piped = spawnSync(process.execPath, [CLI, 'query', '--lake', lake, '--format', 'arrow', 'SELECT * FROM transactions ORDER BY transaction_hash'], {
      timeout: 60_000,
    });
    expect(piped.status, String(piped.stderr)).toBe(0);
    expect(tableFromIPC(piped.stdout).numRows).toBe(rows);
  });

  it('writes Parquet through DuckDB (COPY of the query), and asks for --output', async () => {
    const file = path.join(dir, 'r.parquet');
    const r = await runCli(['query', '--lake', lake, '--format', 'parquet', '-o', file, 'SELECT block_number, value, timestamp FROM transactions']);
    expect(r.code, r.stderr).toBe(0);
    const [meta] = await readParquet(file, 'SELECT count(*)::INT AS n, typeof(any_value(value)) AS t FROM read_parquet($file)');
    expect(meta).toEqual({ n: rows, t: 'DECIMAL(38,0)' });
    const none = await runCli(['query', '--lake', lake, '--format', 'parquet', 'SELECT 1']);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/needs --output/);
  });

  it('refuses COPY, pointing at --output, and leaves no half file when a query fails', async () => {
    const copy = await runCli(['query', '--lake', lake, `COPY transactions TO '${path.join(dir, 'c.csv')}'`]);
    expect(copy.code).toBe(2);
    expect(copy.stderr).toMatch(/read-only.*--output/);
    const out = path.join(dir, 'failed.csv');
    const bad = await runCli(['query', '--lake', lake, '--format', 'csv', '-o', out, "SELECT CAST('x' || range AS INTEGER) FROM range(100000)"]);
    expect(bad.code).toBe(2);
    await expect(stat(out)).rejects.toThrow();
    const missing = await runCli(['query', '--lake', lake, '--format', 'csv', '-o', path.join(dir, 'no', 'such', 'dir.csv'), 'SELECT 1']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--output/);
  });

  it('folds a large table for the terminal, counting every row', async () => {
    const r = await runCli(['query', '--lake', lake, 'SELECT * FROM range(1500)']);
    expect(r.code).toBe(0);
    expect(r.stdout.trimEnd().split('\n')).toHaveLength(1002 + 1);
    expect(r.stdout).toMatch(/\(1500 rows; the first 1000 shown/);
  });

  it('stops quietly when the reader of a pipe goes away', () => {
    const r = spawnSync(
      'bash',
      ['-c', `node ${CLI} query --lake ${lake} --format csv 'SELECT * FROM range(3000000)' | head -2; echo "status=\${PIPESTATUS[0]}"`],
      {
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    expect(r.stdout).toBe('range\n0\nstatus=0\n');
    expect(r.stderr).toBe('');
  });

  it.runIf(unprivilegedCanRun())('queries a read-only copy of a moved lake, saying how to update it', async () => {
    const moved = path.join(dir, 'moved');
    await cp(lake, moved, { recursive: true });
    await lockDown(moved, 0o555);
    await rename(lake, path.join(dir, 'gone'));
    const { chmod } = await import('node:fs/promises');
    await chmod(dir, 0o755);
    const r = spawnSync(process.execPath, [CLI, 'query', '--lake', moved, '--format', 'csv', 'SELECT count(*) AS n FROM transactions'], {
      encoding: 'utf8',
      timeout: 60_000,
      cwd: '/',
      ...unprivileged(),
    });
    await rename(path.join(dir, 'gone'), lake);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe(`n\n${rows}\n`);
    expect(r.stderr).toMatch(/moved from .*lake.*read-only.*with write access/);
  });
});
