/**
 * `chainlake catalog rebuild --catalog` on a distributed lake (real PostgreSQL, real store folder): a whole lake
 * reports whole; a lake damaged as a user can damage it (a ledger column or coordination table dropped, a data file
 * deleted from the store, a file added to it, a table dropped by another DuckLake writer) is reported, recovered where
 * that is possible, and reads again through `query --catalog`. Each damage is made on a copy of one lake (a PostgreSQL
 * database made from the first as a template, and a copy of its store).
 */
import { existsSync } from 'node:fs';
import { copyFile, cp, mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { DeleteObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { rebuildDistributedCatalog, type DistributedRebuildReport } from '../../src/distributed/rebuild.js';
import { runWorker } from '../../src/distributed/worker.js';
import { parseJob } from '../../src/pipeline/job.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { referenceMissing, withReference } from '../ducklake/helpers.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { runCli, runCliCapturing, type CliResult } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';
import { onTestHook } from '../../src/load/test-hooks.js';
import { chainlakeQuery } from './helpers.js';
import { startS3 } from './s3.js';

const ADDRESSES = ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c', '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157'];
const JOB = {
  name: 'dist-rebuild',
  network: 'mainnet',
  target: 'simulator',
  simulator: { seed: 1, scale: 'small' },
  range: { fromBlock: 0, toBlock: 'head', windowBlocks: 12000 },
};
let pgServer: TestPostgres;
let sim: RunningSimulator;
let tmp: Awaited<ReturnType<typeof tempDir>>;
/** The lake every test copies: its database's name and URL, its store, and its rows of transactions. */
let base: { name: string; url: string; store: string };
let rows: number;
let copies = 0;

beforeAll(async () => {
  pgServer = await startPostgres();
  process.env.PGPASSWORD = pgServer.password;
  sim = await startSimulator({ seed: 1, scale: 'small' });
  tmp = await tempDir('chainlake-catalog-rebuild-');
  const db = await pgServer.database();
  const store = path.join(tmp.dir, 'store');
  const doc = { ...JOB, datasets: { transactions: { addresses: ADDRESSES } } };
  await enqueueJob(parseJob(doc, 'dist-rebuild', process.env), doc, { catalog: db.url, store, simulator: sim });
  await runWorker({ catalog: db.url, store, id: 'w', untilIdle: true, pollMs: 50, simulator: sim });
  base = { name: db.name, url: db.url, store };
  rows = count(await chainlakeQuery(db.url, store, 'SELECT count(*) AS n FROM transactions'));
  expect(rows).toBeGreaterThan(10);
}, 180_000);
afterAll(async () => {
  await sim?.close();
  await pgServer?.stop();
  await tmp?.cleanup();
});

const count = (r: Record<string, unknown>[]): number => Number(r[0]?.n);

/** A copy of the lake: a database made from its database as a template, and a copy of its store. */
async function copyLake(): Promise<{ url: string; store: string; sql: (text: string) => Promise<Record<string, unknown>[]> }> {
  const name = `${base.name}_copy_${++copies}`;
  const admin = new pg.Client({ connectionString: base.url.replace(/\/[^/]+$/, '/postgres'), password: pgServer.password });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${base.name}`);
  } finally {
    await admin.end();
  }
  const store = path.join(tmp.dir, name);
  await cp(base.store, store, { recursive: true });
  const url = base.url.replace(/\/[^/]+$/, `/${name}`);
  const sql = async (text: string) => {
    const c = new pg.Client({ connectionString: url, password: pgServer.password });
    await c.connect();
    try {
      return (await c.query(text)).rows as Record<string, unknown>[];
    } finally {
      await c.end();
    }
  };
  return { url, store, sql };
}

/** The newest snapshot's data files of transactions, as paths under `store`. */
async function currentFiles(lake: Awaited<ReturnType<typeof copyLake>>): Promise<{ file: string; rows: number }[]> {
  const files = await lake.sql(
    `SELECT d.path, d.record_count::int AS rows FROM ducklake.ducklake_data_file d JOIN ducklake.ducklake_table t ON t.table_id = d.table_id AND t.end_snapshot IS NULL
     WHERE t.table_name = 'transactions' AND d.end_snapshot IS NULL ORDER BY d.data_file_id`,
  );
  return files.map((f) => ({ file: path.join(lake.store, 'lake', 'main', 'transactions', String(f.path)), rows: Number(f.rows) }));
}

/**
 * A command whose report, output and exit code are the point, not its process: run in this process (everything it
 * writes captured, so a password printed anywhere is seen), with `env` set for the call and restored after.
 */
async function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return runCliCapturing(args, env);
}

function rebuildCli(args: string[]): Promise<{ code: number | null; report: DistributedRebuildReport; stdout: string; stderr: string }> {
  return cli(['catalog', 'rebuild', ...args, '--format', 'json'], { PGPASSWORD: pgServer.password, CHAINLAKE_LAKE: '' }).then((r) => {
    let report: DistributedRebuildReport;
    try {
      report = JSON.parse(r.stdout) as DistributedRebuildReport;
    } catch {
      throw new Error(`catalog rebuild exited ${r.code} without a JSON report: ${r.stderr}`);
    }
    return { ...r, report };
  });
}

describe('catalog rebuild --catalog', () => {
  it('a whole lake reports whole (exit 0), in text and JSON, without printing the password', async () => {
    const withPassword = base.url.replace('postgres@', `postgres:${pgServer.password}@`);
    const json = await rebuildCli(['--catalog', withPassword, '--store', base.store]);
    expect(json.code, json.stderr).toBe(0);
    expect(json.report).toMatchObject({
      whole: true,
      catalogMissing: false,
      recreatedTables: [],
      recreatedColumns: [],
      recreatedLakeTables: [],
      missingFiles: [],
      orphans: [],
      lostTables: [],
      forgotten: null,
    });
    const text = await cli(['catalog', 'rebuild', '--catalog', withPassword, '--store', base.store], { CHAINLAKE_LAKE: '' });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/control plane: every table and column is there/);
    expect(text.stdout).toMatch(/^WHOLE: /m);
    expect(text.stdout).toContain('postgres://postgres:***@127.0.0.1');
    expect(json.stdout + text.stdout + text.stderr).not.toContain(pgServer.password);
  }, 60_000);

  it('a dropped ledger column and coordination table are re-created, and named', async () => {
    const lake = await copyLake();
    const runsBefore = count(await lake.sql(`SELECT count(*) AS n FROM chainlake.windows`));
    await lake.sql(`ALTER TABLE chainlake.windows DROP COLUMN error`);
    await lake.sql(`ALTER TABLE chainlake.runs DROP COLUMN job_doc`);
    await lake.sql(`DROP TABLE chainlake.leases`);
    const r = await rebuildDistributedCatalog({ catalog: lake.url, store: lake.store });
    expect(r.recreatedTables).toEqual(['chainlake.leases']);
    expect(r.recreatedColumns.sort()).toEqual(['chainlake.runs.job_doc', 'chainlake.windows.error']);
    expect(r.whole).toBe(true);
    const columns = await lake.sql(
      `SELECT table_name || '.' || column_name AS c FROM information_schema.columns WHERE table_schema = 'chainlake'
       AND (table_name, column_name) IN (('windows', 'error'), ('runs', 'job_doc'), ('leases', 'holder'))`,
    );
    expect(columns.map((c) => c.c).sort()).toEqual(['leases.holder', 'runs.job_doc', 'windows.error']);
    // The ledger's rows stay; a second rebuild finds nothing to re-create.
    expect(count(await lake.sql(`SELECT count(*) AS n FROM chainlake.windows`))).toBe(runsBefore);
    const again = await rebuildDistributedCatalog({ catalog: lake.url, store: lake.store });
    expect([...again.recreatedTables, ...again.recreatedColumns]).toEqual([]);
    expect(count(await chainlakeQuery(lake.url, lake.store, 'SELECT count(*) AS n FROM transactions'))).toBe(rows);
    expect(count(await chainlakeQuery(lake.url, lake.store, 'SELECT count(*) AS n FROM windows WHERE error IS NULL'))).toBe(runsBefore);
  }, 60_000);

  it('a data file deleted from the store and an orphan added: reported (exit 5), the lake reads again after --forget-missing, nothing deleted', async () => {
    const lake = await copyLake();
    const files = await currentFiles(lake);
    expect(files.length).toBeGreaterThan(1);
    const lost = files[0]!;
    const orphan = path.join(lake.store, 'lake', 'main', 'transactions', 'stray.parquet');
    await copyFile(files[1]!.file, orphan);
    await rm(lost.file);
    await expect(chainlakeQuery(lake.url, lake.store, 'SELECT count(*) AS n FROM transactions')).rejects.toThrow();

    const found = await rebuildCli(['--catalog', lake.url, '--store', lake.store]);
    expect(found.code, found.stderr).toBe(5);
    expect(found.report.whole).toBe(false);
    expect(found.report.missingFiles).toEqual([
      expect.objectContaining({ table: 'transactions', kind: 'data', location: lost.file, rows: lost.rows, untilSnapshot: null }),
    ]);
    expect(found.report.missingFiles[0]!.partition[0]).toBe('mainnet');
    expect(found.report.orphans).toEqual([expect.objectContaining({ location: orphan, area: 'lake' })]);
    expect(found.report.forgotten).toBeNull();
    const text = await cli(['catalog', 'rebuild', '--catalog', lake.url, '--store', lake.store], { PGPASSWORD: pgServer.password });
    expect(text.code).toBe(5);
    expect(text.stdout).toContain(`MISSING from the store, in the newest snapshot (queries of these tables fail):\n  transactions mainnet/`);
    expect(text.stdout).toContain(lost.file);
    expect(text.stdout).toMatch(/ORPHANS: 1 file\(s\)/);
    expect(text.stdout).toMatch(/^NOT WHOLE: exit 5$/m);

    const forgot = await rebuildCli(['--catalog', lake.url, '--store', lake.store, '--forget-missing']);
    expect(forgot.code, forgot.stderr).toBe(5);
    expect(forgot.report.forgotten).toMatchObject({ files: 1 });
    // The newest snapshot reads without the lost file's rows; the file stays named by the snapshots before.
    expect(count(await chainlakeQuery(lake.url, lake.store, 'SELECT count(*) AS n FROM transactions'))).toBe(rows - lost.rows);
    const after = await rebuildCli(['--catalog', lake.url, '--store', lake.store]);
    expect(after.code).toBe(5);
    expect(after.report.missingFiles).toEqual([expect.objectContaining({ location: lost.file, untilSnapshot: forgot.report.forgotten!.snapshotId })]);
    // Nothing was deleted: the orphan is still in the store.
    expect(after.report.orphans.map((o) => o.location)).toEqual([orphan]);

    // Expiring the snapshots that name it leaves a whole lake.
    const m = await cli(['maintain', '--catalog', lake.url, '--store', lake.store, '--keep-snapshots', '1'], { PGPASSWORD: pgServer.password });
    expect(m.code, m.stderr).toBe(0);
    const whole = await rebuildCli(['--catalog', lake.url, '--store', lake.store]);
    expect(whole.code, whole.stderr).toBe(0);
    expect(whole.report.missingFiles).toEqual([]);
  }, 120_000);

  it('a database that lost its DuckLake catalog: reported (exit 5), no empty catalog made in its place (by the rebuild or a worker), the store left whole', async () => {
    const lake = await copyLake();
    const files = await currentFiles(lake);
    await lake.sql(`DROP SCHEMA ducklake CASCADE`);
    const r = await rebuildCli(['--catalog', lake.url, '--store', lake.store]);
    expect(r.code, r.stderr).toBe(5);
    expect(r.report).toMatchObject({ catalogMissing: true, whole: false });
    expect(r.report.orphans.map((o) => o.location)).toEqual(expect.arrayContaining(files.map((f) => f.file)));
    // An empty catalog would turn every file of the store into an orphan that maintain --catalog deletes.
    expect(await lake.sql(`SELECT 1 FROM information_schema.tables WHERE table_schema = 'ducklake'`)).toEqual([]);
    for (const f of files) expect(existsSync(f.file)).toBe(true);
    const text = await cli(['catalog', 'rebuild', '--catalog', lake.url, '--store', lake.store], { PGPASSWORD: pgServer.password });
    expect(text.code).toBe(5);
    expect(text.stdout).toMatch(/LOST: the database has no DuckLake catalog/);
    expect(text.stdout).toMatch(/do NOT run chainlake maintain --catalog/);
    // Nor does a worker starting on it make one.
    const worker = await runCli(['worker', '--catalog', lake.url, '--store', lake.store, '--until-idle'], { env: { PGPASSWORD: pgServer.password } });
    expect(worker.code).toBe(2);
    expect(worker.stderr).toMatch(/records committed windows but its DuckLake catalog \(schema ducklake\) is gone/);
    expect(await lake.sql(`SELECT 1 FROM information_schema.tables WHERE table_schema = 'ducklake'`)).toEqual([]);
  }, 60_000);

  it('on object storage: a deleted object and a stray one are named by their s3:// locations', async () => {
    const s3 = await startS3(['lake']);
    // The endpoint by option only; the environment holds the credentials the AWS SDK finds by itself.
    const saved = Object.fromEntries(Object.keys(s3.credentials).map((k) => [k, process.env[k]]));
    Object.assign(process.env, s3.credentials);
    const storeConnection = s3.connection;
    try {
      const db = await pgServer.database();
      const store = 's3://lake/rebuild';
      const doc = { ...JOB, name: 'dist-rebuild-s3', datasets: { transactions: { addresses: [ADDRESSES[0]] } } };
      await enqueueJob(parseJob(doc, doc.name, process.env), doc, { catalog: db.url, store, storeConnection, simulator: sim });
      await runWorker({ catalog: db.url, store, storeConnection, id: 'w-s3', untilIdle: true, pollMs: 50, simulator: sim });
      expect((await rebuildDistributedCatalog({ catalog: db.url, storeConnection })).whole).toBe(true);

      const c = await db.connect();
      const named = (
        await c.query(
          `SELECT d.path FROM ducklake.ducklake_data_file d JOIN ducklake.ducklake_table t ON t.table_id = d.table_id WHERE t.table_name = 'transactions' AND d.end_snapshot IS NULL`,
        )
      ).rows.map((r) => `${store}/lake/main/transactions/${String(r.path)}`);
      const client = new S3Client({ ...s3.connection, forcePathStyle: true });
      try {
        const key = (location: string) => location.slice('s3://lake/'.length);
        await client.send(new DeleteObjectCommand({ Bucket: 'lake', Key: key(named[0]!) }));
        await client.send(new PutObjectCommand({ Bucket: 'lake', Key: 'rebuild/lake/main/transactions/stray.parquet', Body: 'not read' }));
      } finally {
        client.destroy();
      }
      const r = await rebuildDistributedCatalog({ catalog: db.url, storeConnection });
      expect(r.whole).toBe(false);
      expect(r.store).toBe(store);
      expect(r.missingFiles.map((f) => f.location)).toEqual([named[0]]);
      expect(r.orphans.map((o) => o.location)).toEqual([`${store}/lake/main/transactions/stray.parquet`]);
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      await s3.stop();
    }
  }, 120_000);

  it('--format json on a local lake gives the local rebuild report; --forget-missing is for a distributed lake', async () => {
    const local = path.join(tmp.dir, 'local-lake');
    await mkdir(local);
    const r = await cli(['catalog', 'rebuild', '--lake', local, '--format', 'json'], { CHAINLAKE_CATALOG: '' });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ files: 0, salvage: { problem: 'missing' } });
    const forget = await cli(['catalog', 'rebuild', '--lake', local, '--forget-missing'], { CHAINLAKE_CATALOG: '' });
    expect(forget.code).toBe(2);
    expect(forget.stderr).toMatch(/--forget-missing goes with a distributed lake/);
  }, 60_000);

  const missing = referenceMissing();
  it.skipIf(missing !== null)(
    `--forget-missing while another writer commits to the table: its new file is not taken for missing, and the forgetting is read again ${missing ?? ''}`,
    async () => {
      const lake = await copyLake();
      const [{ d: day }] = (await chainlakeQuery(lake.url, lake.store, 'SELECT CAST(max(block_date) AS VARCHAR) AS d FROM transactions')) as [{ d: string }];
      const lost = (await currentFiles(lake))[0]!;
      await rm(lost.file);
      // Once the rebuild has read the catalog, before it lists the store: a file of the reference's, and its snapshot.
      let reached = 0;
      onTestHook(async (step) => {
        if (step !== 'rebuild-read' || reached++ > 0) return;
        await withReference(
          lake.url,
          [
            `INSERT INTO ref.transactions (transaction_hash, block_number, transaction_index, network, block_date, _run_id, _ingested_at)
             VALUES ('0xref-rebuild', 1, 0, 'mainnet', DATE '${day}', 'reference', TIMESTAMPTZ '2026-01-01 00:00:00+00')`,
          ],
          // The copy's catalog names the first lake's store as its data path: the file goes to the copy's.
          { inlining: 0, dataPath: `${path.join(lake.store, 'lake')}/` },
        );
      });
      let r: DistributedRebuildReport;
      try {
        r = await rebuildDistributedCatalog({ catalog: lake.url, store: lake.store, forgetMissing: true });
      } finally {
        onTestHook();
      }
      // Read twice: the reference's commit to transactions came after the first read.
      expect(reached).toBe(2);
      expect(r.missingFiles).toEqual([expect.objectContaining({ location: lost.file, untilSnapshot: null })]);
      expect(r.forgotten).toMatchObject({ files: 1 });
      expect(count(await chainlakeQuery(lake.url, lake.store, 'SELECT count(*) AS n FROM transactions'))).toBe(rows - lost.rows + 1);
      expect(await chainlakeQuery(lake.url, lake.store, `SELECT transaction_hash FROM transactions WHERE transaction_hash = '0xref-rebuild'`)).toHaveLength(1);
    },
    60_000,
  );
  it.skipIf(missing !== null)(
    `a table another writer dropped while the ledger says its windows committed: named, re-created, the lake reads ${missing ?? ''}`,
    async () => {
      const lake = await copyLake();
      await withReference(lake.url, ['DROP TABLE ref.transactions']);
      const r = await rebuildDistributedCatalog({ catalog: lake.url, store: lake.store });
      expect(r.whole).toBe(false);
      expect(r.lostTables).toEqual([expect.objectContaining({ dataset: 'transactions', rows })]);
      expect(r.recreatedLakeTables).toEqual(['transactions']);
      expect(count(await chainlakeQuery(lake.url, lake.store, 'SELECT count(*) AS n FROM transactions'))).toBe(0);
      // Its watermarks went with it: the next enqueue of a nightly (incremental) job plans the whole range again
      // instead of the blocks after them, and the lake reads every row back.
      expect(await lake.sql(`SELECT count(*)::int AS n FROM chainlake.watermarks WHERE dataset = 'transactions'`)).toEqual([{ n: 0 }]);
      const doc = { ...JOB, range: { ...JOB.range, toBlock: undefined, incremental: true }, datasets: { transactions: { addresses: ADDRESSES } } };
      const queued = await enqueueJob(parseJob(doc, 'dist-rebuild', process.env), doc, { catalog: lake.url, store: lake.store, simulator: sim });
      expect(queued).toMatchObject({ skipped: 0, queued: expect.any(Number) });
      await runWorker({ catalog: lake.url, store: lake.store, id: 'w-again', untilIdle: true, pollMs: 50, simulator: sim });
      expect(count(await chainlakeQuery(lake.url, lake.store, 'SELECT count(*) AS n FROM transactions'))).toBe(rows);
    },
    60_000,
  );
});
