import { spawnSync } from 'node:child_process';
import { cp, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATASETS } from '../../src/datasets/registry.js';
import { LakePaths } from '../../src/load/paths.js';
import { openLakeReader } from '../../src/load/read/reader.js';
import { lakeColumns } from '../../src/load/schema.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { runCliCapturing } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { assertClean, lakeContent, startWriter, writeJob } from './helpers.js';

/** catalog.duckdb: self-describing, usable from a plain DuckDB anywhere, and surviving a move. */
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let script: string;
/** One run's lake, built once: the tests that only read it read it; the others change a copy (copyOfBase). */
let base: string;

const duckdbModule = pathToFileURL(createRequire(import.meta.url).resolve('@duckdb/node-api')).href;

/**
 * What `duckdb <lake>/catalog.duckdb -c '<sql>'` does (there is no duckdb binary here): a separate process
 * with its own DuckDB, opening the catalog read-write as the CLI does, from a working directory elsewhere.
 */
function plainDuckdb(catalog: string, sql: string): { ok: boolean; out: string } {
  const r = spawnSync(process.execPath, [script, catalog, sql], { cwd: os.tmpdir(), encoding: 'utf8', timeout: 30_000 });
  return { ok: r.status === 0, out: (r.stdout + r.stderr).trim() };
}

const run = async (lake: string) => {
  const job = parseJob(
    { name: 'cat', target: 'simulator', lake, concurrency: 4, datasets: { transactions: { addresses: sim.examples.addresses.slice(0, 2) } } },
    'cat',
    process.env,
  );
  const r = await runJob(job, { simulator: sim });
  expect(r.status).toBe('complete');
  return r;
};

/**
 * A copy of the base lake at `lake`, taken in as a lake of its own (a chainlake reader updates the views that name
 * the base's files), so that the copy stands as a lake the run wrote there.
 */
async function copyOfBase(lake: string): Promise<void> {
  await cp(base, lake, { recursive: true });
  (await openLakeReader(new LakePaths(lake))).close();
}

beforeAll(async () => {
  sim = await startSimulator({ seed: 3 });
  ({ dir, cleanup } = await tempDir('chainlake-catalog-'));
  base = path.join(dir, 'base');
  await run(base);
  script = path.join(dir, 'plain-duckdb.mjs');
  await writeFile(
    script,
    `const { DuckDBInstance } = await import(${JSON.stringify(duckdbModule)});
     const [catalog, sql] = process.argv.slice(2);
     const db = await DuckDBInstance.create(catalog);
     const conn = await db.connect();
     const rows = (await conn.runAndReadAll(sql)).getRowsJS();
     console.log(JSON.stringify(rows, (_k, v) => (typeof v === 'bigint' ? Number(v) : v)));
     conn.closeSync(); db.closeSync();`,
  );
});

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

describe('catalog.duckdb', () => {
  it('works from a plain DuckDB in another working directory', async () => {
    const lake = base;
    const r = plainDuckdb(path.join(lake, 'catalog.duckdb'), 'select count(*) from transactions');
    expect(r.ok, r.out).toBe(true);
    expect(JSON.parse(r.out)).toEqual([[(await lakeContent(lake)).transactions!.rows]]);
  });

  it('has a view per dataset with every column commented, a _rejects view, and the bookkeeping tables', async () => {
    const lake = base;
    const views = await queryCatalog(lake, `SELECT view_name, comment FROM duckdb_views() WHERE NOT internal ORDER BY view_name`);
    const names = views.map((v) => v.view_name);
    for (const name of [...Object.keys(DATASETS), '_rejects']) expect(names).toContain(name);
    expect(views.every((v) => typeof v.comment === 'string' && (v.comment as string).length > 10)).toBe(true);
    for (const def of Object.values(DATASETS)) {
      const cols = await queryCatalog(lake, `SELECT column_name, comment, data_type FROM duckdb_columns() WHERE table_name = '${def.name}' AND NOT internal`);
      const byName = new Map(cols.map((c) => [c.column_name as string, c]));
      for (const c of lakeColumns(def)) {
        expect(byName.get(c.name)?.comment, `${def.name}.${c.name}`).toBe(c.doc);
        expect(byName.get(c.name)?.data_type, `${def.name}.${c.name}`).toBe(c.type);
      }
      expect(byName.get('network')?.comment).toMatch(/partition/);
      expect(byName.get(def.partition)?.data_type).toBe('DATE');
      // Every view answers, with files or without (then empty, with the right columns).
      const [n] = await queryCatalog(lake, `SELECT count(*)::BIGINT AS n FROM "${def.name}"`);
      expect(Number(n!.n) >= 0).toBe(true);
    }
    const [rejects] = await queryCatalog(lake, 'SELECT count(*)::BIGINT AS n FROM _rejects');
    expect(Number(rejects!.n)).toBe(0);

    const columns = async (t: string) =>
      (await queryCatalog(lake, `SELECT column_name FROM duckdb_columns() WHERE table_name = '${t}'`)).map((c) => c.column_name);
    expect(await columns('windows')).toEqual(
      expect.arrayContaining([
        'run_id',
        'dataset',
        'network',
        'scope',
        'from_block',
        'to_block',
        'rows_expected',
        'rows_got',
        'requests',
        'cap_hits',
        'status',
      ]),
    );
    expect(await columns('files')).toEqual(expect.arrayContaining(['path', 'rows', 'bytes', 'min_block', 'max_block']));
    expect(await columns('watermarks')).toEqual(expect.arrayContaining(['network', 'dataset', 'scope', 'block']));
    expect(await columns('runs')).toEqual(expect.arrayContaining(['run_id', 'job', 'status', 'report']));
    const windows = await queryCatalog(lake, `SELECT rows_expected, rows_got, requests, status FROM windows`);
    expect(windows).toHaveLength(2);
    expect(windows.every((w) => w.status === 'committed' && w.rows_expected === w.rows_got && Number(w.requests) > 0)).toBe(true);
    const [range] = await queryCatalog(lake, `SELECT min(min_block) AS lo, max(max_block) AS hi FROM files`);
    const [actual] = await queryCatalog(lake, `SELECT min(block_number) AS lo, max(block_number) AS hi FROM transactions`);
    expect(range).toEqual(actual);
    // Each file's record: its rows and block range as the file itself holds them, and its size on disk.
    const files = await queryCatalog(lake, `SELECT path, rows, bytes, min_block, max_block FROM files ORDER BY path`);
    expect(files.length).toBeGreaterThan(1);
    for (const f of files) {
      const file = path.join(lake, String(f.path));
      const [inFile] = await queryCatalog(
        lake,
        `SELECT count(*) AS rows, min(block_number) AS min_block, max(block_number) AS max_block FROM read_parquet('${file}')`,
      );
      expect({ rows: Number(f.rows), min_block: f.min_block, max_block: f.max_block }).toEqual({
        rows: Number(inFile!.rows),
        min_block: inFile!.min_block,
        max_block: inFile!.max_block,
      });
      expect(Number(f.bytes)).toBe((await stat(file)).size);
    }
  });

  it('a moved lake: every chainlake command rebuilds the views, after which plain DuckDB works again', async () => {
    const lake = path.join(dir, 'before-move');
    await copyOfBase(lake);
    const content = await lakeContent(lake);
    const moved = path.join(dir, 'moved', 'lake');
    await rm(path.dirname(moved), { recursive: true, force: true });
    await mkdir(path.dirname(moved), { recursive: true });
    await rename(lake, moved);
    // Views name absolute paths (plain DuckDB resolves relative ones against its working directory).
    expect(plainDuckdb(path.join(moved, 'catalog.duckdb'), 'select count(*) from transactions').ok).toBe(false);
    const q = await runCliCapturing(['query', '--lake', moved, '--format', 'csv', 'select count(*) as n from transactions']);
    expect(q.code, q.stderr).toBe(0);
    expect(q.stdout.trim()).toBe(`n\n${content.transactions!.rows}`);
    const plain = plainDuckdb(path.join(moved, 'catalog.duckdb'), 'select count(*) from transactions');
    expect(plain.ok, plain.out).toBe(true);
    expect(JSON.parse(plain.out)).toEqual([[content.transactions!.rows]]);
    expect(await lakeContent(moved)).toEqual(content);
  });

  it('a lost catalog is rebuilt from the files by `chainlake catalog rebuild`', async () => {
    const lake = path.join(dir, 'lost');
    await copyOfBase(lake);
    const content = await lakeContent(lake);
    await rm(path.join(lake, 'catalog.duckdb'));
    const r = await runCliCapturing(['catalog', 'rebuild', '--lake', lake]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/catalog rebuilt at .*: \d+ files \(\d+ partitions rebuilt from \d+ files on disk\)/);
    const [n] = await queryCatalog(lake, 'SELECT count(*)::BIGINT AS n FROM transactions');
    expect(Number(n!.n)).toBe(content.transactions!.rows);
    const files = await queryCatalog(lake, 'SELECT path, rows::BIGINT AS rows, bytes::BIGINT AS bytes FROM files');
    expect(
      await assertClean(
        lake,
        files.map((f) => ({ path: String(f.path), rows: Number(f.rows), bytes: Number(f.bytes) })),
      ),
    ).toEqual([]);
  });

  it('a user session holding the catalog delays the commit; if it outlasts the wait, nothing is decided: the run fails, keeping its windows, and the next one commits them without sending their requests again', async () => {
    const lake = path.join(dir, 'held');
    await copyOfBase(lake);
    const job = await writeJob(path.join(dir, 'held-b.json'), sim, lake, sim.examples.addresses.slice(2, 4));
    // The writer has merged its commit's files; then a user opens a read-write DuckDB session on the catalog (what
    // `duckdb catalog.duckdb` does) and keeps it longer than the writer is willing to wait. The writer decides its
    // commit only holding the catalog (after checking that no other DuckLake writer changed its tables), so it never does.
    const w = startWriter(['run', job, '-q'], { apiKey: sim.apiKey, hold: 'prepared', env: { CHAINLAKE_CATALOG_WAIT_MS: '300' } });
    expect(await w.held).toBe('prepared');
    const user = await DuckDBInstance.create(path.join(lake, 'catalog.duckdb'));
    w.release();
    const r = await w.done.finally(() => user.closeSync());
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/catalog stayed locked by another process/);
    expect(r.stderr).toMatch(/hint: close the session holding catalog.duckdb .*CHAINLAKE_CATALOG_WAIT_MS/);
    // What it fetched is kept: the hint says so, with the requests the next run does not send again.
    const kept =
      /the 2 windows fetched and not committed \((\d+) rows in (\d+) requests: [^)]*\) are kept: the next run, which resumes this one, commits them without sending those \2 requests again/.exec(
        r.stderr,
      );
    expect(kept, r.stderr).not.toBeNull();
    const status = await runCliCapturing(['status', '--lake', lake, '--format', 'json']);
    expect(status.code, status.stderr).toBe(0);
    const s = JSON.parse(status.stdout) as { pendingCommit: boolean; runs: { status: string }[] };
    expect(s.pendingCommit).toBe(false);
    // The run could not record its failure either (the catalog was held): it reads as running until the next run
    // resumes it.
    expect(s.runs.map((x) => x.status)).toEqual(['running', 'complete']);
    const runIds = async () => Number((await queryCatalog(lake, `SELECT count(DISTINCT _run_id)::BIGINT AS n FROM transactions`))[0]!.n);
    expect(await runIds()).toBe(1);
    // The next run records what the failed one kept (it could not: the catalog was held) and commits it, sending no
    // request; the rows name the run that fetched them.
    const sent = sim.stats().requests;
    const reportFile = path.join(dir, 'held-report.json');
    const next = await runCliCapturing(['run', job, '-q', '--report', reportFile], { CHAINLAKE_API_KEY: sim.apiKey });
    expect(next.code, next.stderr).toBe(0);
    expect(sim.stats().requests - sent).toBe(0);
    expect((JSON.parse(await readFile(reportFile, 'utf8')) as { fromKept: unknown }).fromKept).toMatchObject({
      windows: 2,
      rows: Number(kept![1]),
      requests: Number(kept![2]),
    });
    expect(await runIds()).toBe(2);
    const runs = await queryCatalog(lake, `SELECT run_id, status FROM runs ORDER BY started_at`);
    expect(runs.map((x) => x.status)).toEqual(['complete', 'abandoned', 'complete']);
    expect(await queryCatalog(lake, `SELECT DISTINCT _run_id FROM transactions WHERE _run_id <> '${String(runs[0]!.run_id)}'`)).toEqual([
      { _run_id: runs[1]!.run_id },
    ]);
    expect(await queryCatalog(lake, `SELECT status, count(*)::INTEGER AS n FROM windows WHERE run_id = '${String(runs[1]!.run_id)}' GROUP BY status`)).toEqual([
      { status: 'committed', n: 2 },
    ]);
    expect(await readdir(path.join(lake, '_kept')).catch(() => [])).toEqual([]);
    const files = await queryCatalog(lake, 'SELECT path, rows::BIGINT AS rows, bytes::BIGINT AS bytes FROM files');
    expect(
      await assertClean(
        lake,
        files.map((f) => ({ path: String(f.path), rows: Number(f.rows), bytes: Number(f.bytes) })),
      ),
    ).toEqual([]);
  });

  it('a run killed right after keeping its windows (listed, not recorded: the catalog was held) has them recorded and committed by the next run, no request sent again', async () => {
    const lake = path.join(dir, 'held-killed');
    await copyOfBase(lake);
    const job = await writeJob(path.join(dir, 'held-killed.json'), sim, lake, sim.examples.addresses.slice(2, 4));
    const w = startWriter(['run', job, '-q'], { apiKey: sim.apiKey, hold: 'prepared', crash: 'kept', env: { CHAINLAKE_CATALOG_WAIT_MS: '300' } });
    expect(await w.held).toBe('prepared');
    const user = await DuckDBInstance.create(path.join(lake, 'catalog.duckdb'));
    w.release();
    const r = await w.done.finally(() => user.closeSync());
    expect(r.signal).toBe('SIGKILL');
    const [keptBy] = await readdir(path.join(lake, '_kept'));
    expect(await readdir(path.join(lake, '_kept', keptBy!))).toContain('kept.json');

    const sent = sim.stats().requests;
    const next = await runCliCapturing(['run', job, '-q'], { CHAINLAKE_API_KEY: sim.apiKey });
    expect(next.code, next.stderr).toBe(0);
    expect(sim.stats().requests - sent).toBe(0);
    const runs = await queryCatalog(lake, `SELECT run_id, status FROM runs ORDER BY started_at`);
    expect(runs.map((x) => x.status)).toEqual(['complete', 'abandoned', 'complete']);
    expect(runs[1]!.run_id).toBe(keptBy);
    expect(await queryCatalog(lake, `SELECT status, count(*)::INTEGER AS n FROM windows WHERE run_id = '${keptBy}' GROUP BY status`)).toEqual([
      { status: 'committed', n: 2 },
    ]);
    expect(await readdir(path.join(lake, '_kept'))).toEqual([]);
    // The lake a run nobody held makes.
    const clean = path.join(dir, 'held-killed-clean');
    await copyOfBase(clean);
    const cleanRun = await runCliCapturing(
      ['run', await writeJob(path.join(dir, 'held-killed-clean.json'), sim, clean, sim.examples.addresses.slice(2, 4)), '-q'],
      {
        CHAINLAKE_API_KEY: sim.apiKey,
      },
    );
    expect(cleanRun.code, cleanRun.stderr).toBe(0);
    expect(await lakeContent(lake)).toEqual(await lakeContent(clean));
  });
});
