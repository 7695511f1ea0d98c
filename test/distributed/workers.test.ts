import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { openDistributedLake } from '../../src/distributed/read.js';
import { runWorker } from '../../src/distributed/worker.js';
import { commitFetched } from '../../src/distributed/commit.js';
import { takeLease } from '../../src/distributed/lease.js';
import { openCatalog } from '../../src/distributed/control-plane.js';
import type { CatalogDb } from '../../src/ducklake/catalog-db.js';
import { openStore, type StoreConnection } from '../../src/distributed/store.js';
import { openEngine } from '../../src/load/engine.js';
import { silentLogger } from '../../src/pipeline/log.js';
import { setGarbageCollector } from '../../src/pipeline/garbage.js';
import { loadJobDocument, parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import type { Logger } from '../../src/pipeline/log.js';
import { startSimulator } from '../../src/simulator/index.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { tempDir } from '../helpers/lake.js';
import { openCatalogFile, openReference, referenceMissing } from '../ducklake/helpers.js';
import { demoJobFile, distributedRows, expectSameFileOptions, singleMachineRows, VOLATILE } from './helpers.js';
import { startS3, type TestS3 } from './s3.js';

let pg: TestPostgres;
let tmp: Awaited<ReturnType<typeof tempDir>>;
let s3: TestS3 | undefined;
let single: Promise<Awaited<ReturnType<typeof singleMachineRows>>> | undefined;
/** The folder of the single-machine demo lake. */
const singleLake = () => path.join(tmp.dir, 'single');
/** The demo job's distributed lake of the first test, for the reference extension's reading of both. */
let demoCatalog: string | undefined;

/**
 * The demo job over the chain's first 12,000 blocks of 36,000: every dataset and every kind of partition, 14,135
 * rows instead of 25,687. The commits are smaller to match (commitRows below), so later commits still rewrite
 * partitions earlier ones wrote.
 */
const demoJob = (): Promise<string> => demoJobFile(tmp.dir, 12_000);

/** The demo job run on one machine, once for the file: what every distributed lake here must equal. */
function singleMachine(): Promise<Awaited<ReturnType<typeof singleMachineRows>>> {
  single ??= (async () => {
    const { job } = await loadJobDocument(await demoJob(), process.env);
    await runJob({ ...job, lake: { ...job.lake, dir: singleLake() } });
    return singleMachineRows(singleLake());
  })();
  return single;
}

/**
 * The statistics the catalog records for each current file, by table, partition folder and column name, without
 * the volatile columns' and the sizes (which follow the volatile values).
 */
async function fileStats(catalog: CatalogDb): Promise<Map<string, string[]>> {
  const rows = await catalog.query(
    `SELECT t.table_name, d.path, c.column_name, s.min_value, s.max_value, s.null_count, s.contains_nan
     FROM ducklake_file_column_stats s
     JOIN ducklake_data_file d ON d.data_file_id = s.data_file_id AND d.end_snapshot IS NULL
     JOIN ducklake_table t ON t.table_id = d.table_id AND t.end_snapshot IS NULL
     JOIN ducklake_column c ON c.table_id = s.table_id AND c.column_id = s.column_id AND c.end_snapshot IS NULL
     ORDER BY t.table_name, d.path, c.column_name`,
  );
  const out = new Map<string, string[]>();
  for (const r of rows) {
    if (VOLATILE.has(String(r.column_name))) continue;
    const key = `${String(r.table_name)}/${path.dirname(String(r.path))}`;
    out.set(key, [
      ...(out.get(key) ?? []),
      `${String(r.column_name)} ${String(r.min_value)}..${String(r.max_value)} nulls ${String(r.null_count)} nan ${String(r.contains_nan)}`,
    ]);
  }
  return out;
}

/** The distributed lake against a single-machine one (by default the demo job's, which covers every dataset). */
async function expectEqualsSingleMachine(
  catalog: string,
  single?: Awaited<ReturnType<typeof singleMachineRows>>,
  storeConnection?: StoreConnection,
): Promise<void> {
  const expected = single ?? (await singleMachine());
  if (!single) {
    // Every dataset of the demo job, thousands of rows: the comparison below covers the whole lake.
    expect(expected.size).toBeGreaterThanOrEqual(18);
    expect([...expected.values()].reduce((n, t) => n + t.rows, 0)).toBeGreaterThan(5_000);
  }
  const dist = await openDistributedLake({ catalog, storeConnection });
  try {
    for (const [name, want] of expected) {
      // A table the run never wrote a row to (no rejects) does not exist in the DuckLake.
      if (!dist.tables.includes(name)) {
        expect({ name, rows: want.rows }).toEqual({ name, rows: 0 });
        continue;
      }
      const got = await distributedRows(dist.conn, name, want.columns);
      expect({ name, ...got }).toEqual({ name, rows: want.rows, digest: want.digest });
    }
  } finally {
    dist.close();
  }
}

beforeAll(async () => {
  pg = await startPostgres();
  process.env.PGPASSWORD = pg.password;
  tmp = await tempDir('chainlake-distributed-');
}, 120_000);

afterAll(async () => {
  await s3?.stop();
  await pg?.stop();
  await tmp?.cleanup();
});

/**
 * The catalog the workers wrote, against the spec: its 28 tables column for column (name, position, type,
 * nullability) and primary keys as the spec's creation script makes them in the same PostgreSQL, and its table
 * statistics equal to the rows a reader reads.
 */
async function expectConformingCatalog(client: import('pg').Client, catalog: string): Promise<void> {
  await client.query('CREATE SCHEMA spec');
  await client.query('SET search_path TO spec');
  await client.query(await readFile(path.resolve('test/ducklake/fixtures/spec-ddl.sql'), 'utf8'));
  await client.query('SET search_path TO public');
  const layout = async (schema: string) =>
    (
      await client.query(
        `SELECT table_name, ordinal_position, column_name, data_type, is_nullable FROM information_schema.columns
         WHERE table_schema = $1 AND table_name LIKE 'ducklake%' ORDER BY table_name, ordinal_position`,
        [schema],
      )
    ).rows;
  const keys = async (schema: string) =>
    (
      await client.query(
        `SELECT tc.table_name || '(' || string_agg(k.column_name, ',' ORDER BY k.ordinal_position) || ')' AS pk
         FROM information_schema.table_constraints tc
         JOIN information_schema.key_column_usage k ON k.constraint_name = tc.constraint_name AND k.table_schema = tc.table_schema
         WHERE tc.table_schema = $1 AND tc.constraint_type = 'PRIMARY KEY' GROUP BY tc.table_name ORDER BY 1`,
        [schema],
      )
    ).rows;
  const mine = await layout('ducklake');
  expect(new Set(mine.map((r) => r.table_name)).size).toBe(28);
  expect(mine).toEqual(await layout('spec'));
  expect(await keys('ducklake')).toEqual(await keys('spec'));
  const stats = (
    await client.query(`SELECT t.table_name, s.record_count::INT AS n FROM ducklake.ducklake_table t JOIN ducklake.ducklake_table_stats s USING (table_id)`)
  ).rows;
  expect(stats.length).toBeGreaterThan(10);
  const dist = await openDistributedLake({ catalog });
  try {
    for (const { table_name, n } of stats) {
      const [[rows]] = (await dist.conn.runAndReadAll(`SELECT count(*)::INT FROM "${table_name}"`)).getRowsJS() as [[number]];
      expect({ table_name, n }).toEqual({ table_name, n: rows });
    }
  } finally {
    dist.close();
  }
}

describe('distributed mode: enqueue, workers, one committer', () => {
  // One lake-file writer for both modes: the demo job (every dataset) on one machine and on three workers, compared
  // row for row and file option for file option.
  it('three workers fill a DuckLake equal, row for row, to a single-machine run of the same job, every partition file written with the same Parquet options', async () => {
    const { job, doc } = await loadJobDocument(await demoJob(), process.env);
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store');
    const queued = await enqueueJob(job, doc, { catalog: db.url, store });
    expect(queued.resumed).toBe(false);
    expect(queued.queued).toBeGreaterThan(10);
    // Enqueueing again while the run is open adds nothing.
    const again = await enqueueJob(job, doc, { catalog: db.url, store });
    expect(again).toMatchObject({ runId: queued.runId, resumed: true, queued: 0 });

    // What went wrong, if anything did, is shown with the count it explains.
    const warnings: string[] = [];
    // Each commit is followed by a collection (a committing worker's results hold DuckDB memory until V8 collects them).
    let collections = 0;
    const commitsAt: number[] = [];
    setGarbageCollector(() => void collections++);
    const log: Logger = {
      log: (level, event, message) => {
        if (event === 'commit') commitsAt.push(collections);
        if (level !== 'debug' && level !== 'info') warnings.push(`${event}: ${message}`);
      },
    };
    // An account each: workers of one account take turns, these fetch side by side (each lake file merges the
    // fragments of several workers).
    const reports = await Promise.all(
      ['w1', 'w2', 'w3'].map((id) =>
        runWorker({ catalog: db.url, store, id, account: id, untilIdle: true, pollMs: 100, leaseSeconds: 30, commitRows: 5_000, log }),
      ),
    ).finally(() => setGarbageCollector(undefined));
    expect(reports.filter((r) => r.windowsFetched > 0).length, 'windows fetched by each worker').toBeGreaterThanOrEqual(2);
    // Several commits (about 14,000 rows, 5,000 a commit): a later one rewrites partitions an earlier one wrote.
    expect(commitsAt.length).toBeGreaterThan(1);
    commitsAt.forEach((at, i) => expect((commitsAt[i + 1] ?? collections) - at, `collections after commit ${i}`).toBeGreaterThan(0));
    expect(reports.reduce((n, r) => n + r.windowsFetched, 0)).toBeGreaterThanOrEqual(queued.queued);
    expect(
      reports.reduce((n, r) => n + r.windowsFailed, 0),
      warnings.join('\n'),
    ).toBe(0);

    await expectEqualsSingleMachine(db.url);
    await expectConformingCatalog(await db.connect(), db.url);
    demoCatalog = db.url;

    // File option for file option, partition by partition.
    const lake = singleLake();
    const { singleFiles, mine } = await expectSameFileOptions(lake, db.url);
    expect(singleFiles.size).toBeGreaterThan(50);
    expect([...mine.values()].some((p) => p.columns.some((c) => / DELTA_BINARY_PACKED /.test(c)))).toBe(true);
    // The statistics the catalog records, taken the same way from the same rows.
    const one = await openCatalogFile(path.join(lake, 'catalog.duckdb'), { readOnly: true });
    const singleStats = await fileStats(one.catalog).finally(() => one.close());
    const cat = await openCatalog(db.url);
    const distStats = await fileStats(cat.catalog).finally(() => cat.client.end());
    expect(singleStats.size).toBe(singleFiles.size);
    for (const [key, stats] of singleStats) expect({ key, stats: distStats.get(key) }).toEqual({ key, stats });
  }, 300_000);

  const missing = referenceMissing();
  it.skipIf(missing !== null)(
    `the reference ducklake extension reads both lakes with the same rows as chainlake${missing ? ` (${missing})` : ''}`,
    async () => {
      expect(demoCatalog, 'the lakes of the test before').toBeDefined();
      const expected = await singleMachine();
      for (const source of [path.join(singleLake(), 'catalog.duckdb'), demoCatalog!]) {
        const ref = await openReference(source);
        try {
          const tables = ((await ref.conn.runAndReadAll(`SELECT table_name FROM duckdb_tables() WHERE database_name = 'ref'`)).getRowsJS() as [string][]).map(
            ([t]) => t,
          );
          for (const [name, want] of expected) {
            if (!tables.includes(name)) {
              expect({ source, name, rows: want.rows }).toEqual({ source, name, rows: 0 });
              continue;
            }
            expect({ source, name, ...(await distributedRows(ref.conn, name, want.columns)) }).toEqual({ source, name, rows: want.rows, digest: want.digest });
          }
        } finally {
          ref.close();
        }
      }
    },
    120_000,
  );

  it('a window cut at its row target queues its rest with its record, and the lake equals a single-machine run', async () => {
    // A dense scope of a tall chain: its listing passes the API's offset cap, where a window may stop at its row
    // target (the only place it can) and the rest of its range becomes a window of its own.
    const sim = await startSimulator({ seed: 5, chain: 'sparse' });
    try {
      const doc = {
        name: 'tall',
        target: 'simulator',
        lake: path.join(tmp.dir, 'tall-single'),
        range: { fromBlock: 40_000_000 },
        datasets: { erc20_transfers: { addresses: [sim.sparseAddresses!.dense] } },
      };
      const job = parseJob(doc, 'workers-test', process.env);
      await runJob(job, { simulator: sim });
      const expected = await singleMachineRows(job.lake.dir);
      const db = await pg.database();
      const store = path.join(tmp.dir, 'store-cut');
      const queued = await enqueueJob(job, doc, { catalog: db.url, store, simulator: sim });
      const reports = await Promise.all(
        ['c1', 'c2'].map((id) =>
          runWorker({ catalog: db.url, store, simulator: sim, id, untilIdle: true, pollMs: 100, leaseSeconds: 30, commitRows: 20_000, windowRows: 10_000 }),
        ),
      );
      const client = await db.connect();
      try {
        const windows = (await client.query(`SELECT status, rows_got FROM chainlake.windows WHERE run_id = $1`, [queued.runId])).rows;
        // Each cut added a window to the run; every window, planned or cut off, was fetched once and committed.
        expect(queued.queued).toBe(1);
        expect(windows.length).toBeGreaterThanOrEqual(3);
        expect(windows.filter((w) => w.status !== 'committed')).toEqual([]);
        expect(reports.reduce((n, r) => n + r.windowsFetched, 0)).toBe(windows.length);
        expect(reports.reduce((n, r) => n + r.windowsFailed, 0)).toBe(0);
        for (const w of windows) expect(Number(w.rows_got)).toBeLessThanOrEqual(10_000);
      } finally {
        await client.end();
      }
      expect([...expected.values()].reduce((n, t) => n + t.rows, 0)).toBeGreaterThan(30_000);
      await expectEqualsSingleMachine(db.url, expected);
    } finally {
      await sim.close();
    }
  }, 300_000);

  it("one commit of many fragments larger than the engine's memory spills instead of failing, and the lake equals a single-machine run", async () => {
    // Transactions (the widest rows) of the demo's addresses in windows of 1,000 blocks: about 13,500 rows in
    // about 220 fragments, committed at once by an engine with a quarter of a worker's memory.
    const sim = await startSimulator({ seed: 1, scale: 'small' });
    try {
      const demo = JSON.parse(await readFile(path.resolve('jobs/demo.json'), 'utf8')) as { datasets: { transactions: unknown } };
      const doc = {
        name: 'many-fragments',
        target: 'simulator',
        lake: path.join(tmp.dir, 'many-single'),
        range: { fromBlock: 0, toBlock: 'head', windowBlocks: 1_000 },
        datasets: { transactions: demo.datasets.transactions },
      };
      const job = parseJob(doc, 'workers-test', process.env);
      // The single machine in its default windows: its rows do not depend on how the range is cut, and it need not
      // send the 216 windows' requests the workers' fragments are made of.
      const single = parseJob({ ...doc, range: { fromBlock: 0, toBlock: 'head' } }, 'workers-test', process.env);
      await runJob(single, { simulator: sim });
      const expected = await singleMachineRows(single.lake.dir);
      expect(expected.get('transactions')?.rows).toBeGreaterThan(10_000);
      const db = await pg.database();
      const store = path.join(tmp.dir, 'store-many');
      const queued = await enqueueJob(job, doc, { catalog: db.url, store, simulator: sim });
      expect(queued.queued).toBeGreaterThan(150);
      // Another holder has the committer lease: the worker fetches every window and commits none.
      const client = await db.connect();
      expect(await takeLease(client, 'test-committer', 600)).toBe(true);
      const stop = new AbortController();
      const worker = runWorker({ catalog: db.url, store, simulator: sim, id: 'fetcher', pollMs: 50, signal: stop.signal });
      const left = async () =>
        Number((await client.query(`SELECT count(*)::INT AS n FROM chainlake.windows WHERE status NOT IN ('fetched', 'failed')`)).rows[0].n);
      for (let polls = 0; (await left()) > 0; polls++) {
        if (polls > 6_000) throw new Error('the worker did not fetch every window within 2 minutes');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      stop.abort();
      expect((await worker).windowsFailed).toBe(0);
      const cat = await openCatalog(db.url);
      const engine = await openEngine({ tempDir: path.join(tmp.dir, 'many-engine'), memoryLimit: '40MB' });
      const lakeStore = await openStore(store);
      try {
        const committed = await commitFetched(
          { catalog: cat.catalog, engine, store: lakeStore, holder: 'test-committer', leaseSeconds: 600, log: silentLogger },
          1_000_000,
        );
        expect(committed).toBe(queued.queued);
      } finally {
        engine.close();
        await cat.client.end();
        await lakeStore.close();
        await client.end();
      }
      await expectEqualsSingleMachine(db.url, expected);
    } finally {
      await sim.close();
    }
  }, 300_000);

  it('the same on S3-compatible object storage (s3rver): fragments and lake files go through the bucket, readers download them', async () => {
    s3 = await startS3(['lake']);
    // The endpoint by option only (the environment holds the SDK's credentials, not where the store is): the seam
    // through which the CLI hands the store what it resolved.
    Object.assign(process.env, s3.credentials);
    const storeConnection = s3.connection;
    // Two of the demo's datasets (a paged listing of several windows and a finance one): the store's path is the
    // same for every dataset, and their tables are the demo's single-machine ones (each dataset's rows depend on
    // its own scopes and the run's range only), so the first test's single-machine run is the reference.
    const datasets = ['transactions', 'stable_chart'];
    const demo = JSON.parse(await readFile(await demoJob(), 'utf8')) as { datasets: Record<string, unknown> };
    const doc = { ...demo, datasets: Object.fromEntries(datasets.map((d) => [d, demo.datasets[d]])) };
    const job = parseJob(doc, 'workers-test', process.env);
    const expected = new Map([...(await singleMachine())].filter(([name]) => datasets.includes(name)));
    expect([...expected.keys()].sort()).toEqual([...datasets].sort());
    expect([...expected.values()].reduce((n, t) => n + t.rows, 0)).toBeGreaterThan(1_000);
    const db = await pg.database();
    const store = 's3://lake/team/chain';
    const queued = await enqueueJob(job, doc, { catalog: db.url, store, storeConnection });
    const reports = await Promise.all(
      ['s1', 's2'].map((id) => runWorker({ catalog: db.url, store, storeConnection, id, untilIdle: true, pollMs: 100, leaseSeconds: 30, commitRows: 20_000 })),
    );
    expect(reports.reduce((n, r) => n + r.windowsFetched, 0)).toBeGreaterThanOrEqual(queued.queued);
    const pgClient = await db.connect();
    const dataPath = (await pgClient.query(`SELECT value FROM ducklake.ducklake_metadata WHERE key = 'data_path'`)).rows[0].value;
    expect(dataPath).toBe('s3://lake/team/chain/lake/');
    await expectEqualsSingleMachine(db.url, expected, storeConnection);
  }, 300_000);
});
