// The single-machine lake is a DuckLake: its catalog.duckdb has the spec's tables, every table reads the same
// through the DuckLake reader as through its view, earlier snapshots are read by id and by time, `maintain`
// frees what no kept snapshot needs, and a lake of the layout before (data.parquet per partition) is converted.
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDbCatalog } from '../../src/ducklake/catalog-db.js';
import { DUCKLAKE_TABLES } from '../../src/ducklake/ddl.js';
import { planScan } from '../../src/ducklake/reader.js';
import { LakePaths } from '../../src/load/paths.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { runCliCapturing } from '../helpers/cli.js';
import { assertClean, catalogFiles, lakeContent, listLake, withDuck, writeJob } from './helpers.js';

let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let lake: string;
/** The newest snapshot after the first run, and when it was committed. */
let first: { snapshot: number; time: string; rows: number };

/**
 * A chainlake command, run in this process (its output and the exit code the bin would set): what is tested is what
 * the commands write and read, not their process (test/load/crash.test.ts and the soaks kill real ones).
 */
const cli = (args: string[]) => runCliCapturing(args, { CHAINLAKE_API_KEY: sim.apiKey });

beforeAll(async () => {
  sim = await startSimulator({ seed: 23 });
  ({ dir, cleanup } = await tempDir('chainlake-ducklake-lake-'));
  lake = path.join(dir, 'lake');
  const jobA = await writeJob(path.join(dir, 'a.json'), sim, lake, sim.examples.addresses.slice(0, 2));
  expect((await cli(['run', jobA, '-q'])).code).toBe(0);
  const [s] = await queryCatalog(lake, 'SELECT max(snapshot_id)::BIGINT AS id, max(snapshot_time)::VARCHAR AS t FROM ducklake_snapshot');
  const [n] = await queryCatalog(lake, 'SELECT count(*)::BIGINT AS n FROM transactions');
  // A millisecond after the commit (its time has microseconds), long before the next run's.
  first = { snapshot: Number(s!.id), time: new Date(new Date(String(s!.t)).getTime() + 1).toISOString(), rows: Number(n!.n) };
  // A second run over more addresses: the partitions it touches get new files, the old ones end.
  const jobB = await writeJob(path.join(dir, 'b.json'), sim, lake, sim.examples.addresses.slice(0, 4));
  expect((await cli(['run', jobB, '-q'])).code).toBe(0);
}, 120_000);

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

describe('the single-machine lake as a DuckLake', () => {
  it("catalog.duckdb holds the spec's 28 tables, column for column, and one snapshot per commit", async () => {
    const columns = await queryCatalog(
      lake,
      `SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE table_name LIKE 'ducklake\\_%' ESCAPE '\\' ORDER BY table_name, column_index`,
    );
    const tables = new Map<string, string[]>();
    for (const c of columns) tables.set(String(c.table_name), [...(tables.get(String(c.table_name)) ?? []), `${String(c.column_name)} ${String(c.data_type)}`]);
    expect([...tables.keys()].sort()).toEqual(DUCKLAKE_TABLES.map((t) => t.name).sort());
    const spelled = (type: string) => (type === 'TIMESTAMPTZ' ? 'TIMESTAMP WITH TIME ZONE' : type);
    for (const t of DUCKLAKE_TABLES) expect(tables.get(t.name), t.name).toEqual(t.columns.map((c) => `${c.name} ${spelled(c.type)}`));
    const [meta] = await queryCatalog(lake, `SELECT value FROM ducklake_metadata WHERE key = 'data_path'`);
    expect(meta!.value).toBe(`${path.resolve(lake)}/`);
    // Each run committed once, and each commit is one snapshot whatever the number of tables it wrote.
    const commits = await queryCatalog(lake, `SELECT commit_message FROM ducklake_snapshot_changes WHERE changes_made LIKE '%inserted_into_table%'`);
    expect(commits).toHaveLength(2);
  });

  it('every table reads the same through the DuckLake reader as through its view', async () => {
    const instance = await DuckDBInstance.create(path.join(lake, 'catalog.duckdb'), { access_mode: 'READ_ONLY' });
    const conn = await instance.connect();
    try {
      const catalog = new DuckDbCatalog(conn);
      const names = (await catalog.query(`SELECT table_name FROM ducklake_table WHERE end_snapshot IS NULL ORDER BY 1`)).map((r) => String(r.table_name));
      expect(names).toContain('transactions');
      for (const name of names) {
        const scan = await planScan(catalog, name, { dataPath: `${path.resolve(lake)}/` });
        const digest = async (sql: string) =>
          String((await conn.runAndReadAll(`SELECT md5(string_agg(to_json(r)::VARCHAR, '' ORDER BY to_json(r)::VARCHAR)) FROM (${sql}) r`)).getRowsJS()[0]![0]);
        expect(await digest(scan.sql), name).toBe(await digest(`SELECT * FROM "${name}"`));
      }
    } finally {
      conn.closeSync();
      instance.closeSync();
    }
  });

  it('`query --as-of` reads an earlier snapshot by id and by time; a bad one is refused by name', async () => {
    const now = Number((await queryCatalog(lake, 'SELECT count(*)::BIGINT AS n FROM transactions'))[0]!.n);
    expect(now).toBeGreaterThan(first.rows);
    for (const asOf of [String(first.snapshot), first.time]) {
      const r = await cli(['query', '--lake', lake, '--as-of', asOf, '--format', 'csv', 'SELECT count(*) AS n FROM transactions']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.trim().split('\n')[1]).toBe(String(first.rows));
    }
    const gone = await cli(['query', '--lake', lake, '--as-of', '999999', 'SELECT 1']);
    expect(gone.code).toBe(2);
    expect(gone.stderr).toMatch(/snapshot 999999 does not exist/);
  });

  it("a run's batch commits leave one snapshot of that run: the files only its earlier batches needed are deleted", async () => {
    const batched = path.join(dir, 'batched');
    const job = await writeJob(path.join(dir, 'batched.json'), sim, batched, sim.examples.addresses.slice(0, 4), { commit: { everyRows: 300 } });
    const r = await cli(['run', job, '--log-format', 'json']);
    expect(r.code, r.stderr).toBe(0);
    // Several commits, each a snapshot when it was made.
    expect((r.stderr.match(/"event":"commit"/g) ?? []).length).toBeGreaterThan(2);
    const mine = await queryCatalog(batched, `SELECT commit_message FROM ducklake_snapshot_changes WHERE commit_message LIKE '%/batch-%'`);
    expect(mine).toHaveLength(1);
    const current = await catalogFiles(batched);
    expect((await listLake(batched)).filter((f) => f.endsWith('.parquet'))).toHaveLength(current.length);
    expect(await assertClean(batched, current)).toEqual([]);
    expect(await lakeContent(batched)).toEqual(await lakeContent(lake));
  });

  it('`maintain --keep-snapshots 1` deletes the files only earlier snapshots needed; the newest reads the same', async () => {
    const copy = path.join(dir, 'maintained');
    await rm(copy, { recursive: true, force: true });
    await mkdir(copy, { recursive: true });
    const { cp } = await import('node:fs/promises');
    await cp(lake, copy, { recursive: true });
    const before = await lakeContent(copy);
    const filesBefore = (await listLake(copy)).filter((f) => f.endsWith('.parquet')).length;
    const current = (await catalogFiles(copy)).length;
    expect(filesBefore).toBeGreaterThan(current);
    // A duration it cannot read is a usage error, before anything is deleted.
    const bad = await cli(['maintain', '--lake', copy, '--keep-snapshots', '1', '--expire-older-than', 'a week']);
    expect(bad.code, bad.stderr).toBe(2);
    expect(bad.stderr).toContain('--expire-older-than a week: expected a duration such as 7d');
    expect((await listLake(copy)).filter((f) => f.endsWith('.parquet'))).toHaveLength(filesBefore);
    const r = await cli(['maintain', '--lake', copy, '--keep-snapshots', '1']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`deleted ${filesBefore - current} files no snapshot needs`));
    expect((await listLake(copy)).filter((f) => f.endsWith('.parquet'))).toHaveLength(current);
    expect(await lakeContent(copy)).toEqual(before);
    expect(await assertClean(copy, await catalogFiles(copy))).toEqual([]);
    const old = await cli(['query', '--lake', copy, '--as-of', String(first.snapshot), 'SELECT 1']);
    expect(old.code).toBe(2);
  });

  it('a lake of the layout before DuckLake (data.parquet per partition, a files table) is refused, then converted by `catalog rebuild`', async () => {
    const legacy = path.join(dir, 'legacy');
    const paths = new LakePaths(legacy);
    const content = await lakeContent(lake);
    // The old layout: each partition's rows in <table>/network=…/<date>=…/data.parquet, without the partition
    // columns inside; the catalog with its `files` table.
    await withDuck(async (q) => {
      for (const f of await catalogFiles(lake)) {
        const [, table, network, part] = f.path.split('/');
        const target = path.join(legacy, table!, network!, part!);
        await mkdir(target, { recursive: true });
        const [partitionColumn] = part!.split('=');
        await q(
          `COPY (SELECT * EXCLUDE (network, "${partitionColumn}") FROM read_parquet('${path.join(lake, f.path)}')) TO '${path.join(target, 'data.parquet')}' (FORMAT parquet)`,
        );
      }
      await q(`ATTACH '${paths.catalog}' AS old`);
      await q(`CREATE TABLE old.files (path VARCHAR PRIMARY KEY, dataset VARCHAR, rows BIGINT)`);
      await q(`CREATE TABLE old.runs (run_id VARCHAR PRIMARY KEY, job VARCHAR, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ, status VARCHAR, report JSON)`);
      await q(`DETACH old`);
    });
    const refused = await cli(['query', '--lake', legacy, 'SELECT count(*) FROM transactions']);
    expect(refused.code).not.toBe(0);
    const status = await cli(['run', path.join(dir, 'a.json'), '--lake', legacy, '-q']);
    expect(status.code).not.toBe(0);
    expect(status.stderr).toMatch(/written by an earlier chainlake .*catalog rebuild/s);

    const rebuilt = await cli(['catalog', 'rebuild', '--lake', legacy]);
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    expect(await lakeContent(legacy)).toEqual(content);
    expect(await assertClean(legacy, await catalogFiles(legacy))).toEqual([]);
  });
});
