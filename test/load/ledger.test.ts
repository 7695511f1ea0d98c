/**
 * The one run ledger (src/load/ledger/schema.ts): an older catalog of each kind — a local catalog.duckdb of format 3
 * and a PostgreSQL control plane of the distributed mode's own columns — is migrated in place, idempotently, and
 * reads back in the one vocabulary with its rows kept.
 */
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupControlPlane } from '../../src/distributed/control-plane.js';
import { openDistributedLake } from '../../src/distributed/read.js';
import { Catalog, type DeclaredTable } from '../../src/load/catalog.js';
import { LEDGER_TABLES } from '../../src/load/ledger/schema.js';
import { LakePaths } from '../../src/load/paths.js';
import { openEngine } from '../../src/load/engine.js';
import { readPlanningState, readRequestUsage } from '../../src/load/state.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { tempDir } from '../helpers/lake.js';

let tmp: Awaited<ReturnType<typeof tempDir>>;
let pg: TestPostgres | undefined;

beforeAll(async () => {
  tmp = await tempDir('chainlake-ledger-');
});

afterAll(async () => {
  await pg?.stop();
  await tmp?.cleanup();
});

const DECLARED: DeclaredTable = {
  shape: { name: 'erc20_transfer_events', columns: [], key: ['transaction_hash', 'log_index'], order: ['timestamp'], partition: 'block_date' },
  doc: 'Decoded ERC-20 transfers.',
  partitionDoc: 'UTC date of the block (partition).',
};

/** A catalog.duckdb's ledger as chainlake wrote it at catalog format 3 (load/catalog.ts TABLES before format 4). */
const FORMAT_3 = [
  `CREATE TABLE lake_meta (key VARCHAR PRIMARY KEY, value VARCHAR)`,
  `CREATE TABLE runs (run_id VARCHAR PRIMARY KEY, job VARCHAR, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ, status VARCHAR, report JSON)`,
  `CREATE TABLE windows (run_id VARCHAR, dataset VARCHAR, network VARCHAR, scope VARCHAR, from_block BIGINT, to_block BIGINT,
     rows_expected BIGINT, rows_got BIGINT, rejects BIGINT, requests BIGINT, retries BIGINT, throttles BIGINT, cap_hits BIGINT, splits BIGINT,
     status VARCHAR, error VARCHAR, committed_at TIMESTAMPTZ)`,
  `CREATE TABLE watermarks (network VARCHAR, dataset VARCHAR, scope VARCHAR, block BIGINT, run_id VARCHAR, updated_at TIMESTAMPTZ,
     PRIMARY KEY (network, dataset, scope))`,
  `CREATE TABLE commits (commit_id VARCHAR PRIMARY KEY, run_id VARCHAR, files BIGINT, rows BIGINT, bytes BIGINT, committed_at TIMESTAMPTZ, recovered_by VARCHAR)`,
  `CREATE TABLE request_usage (day DATE, account VARCHAR, run_id VARCHAR, requests BIGINT, PRIMARY KEY (day, account, run_id))`,
  `INSERT INTO lake_meta VALUES ('format', '3')`,
  // A decoded table's declaration, where catalogs before the ledger's declared_tables kept it.
  `INSERT INTO lake_meta VALUES ('table:erc20_transfer_events', '${JSON.stringify(DECLARED)}')`,
  `INSERT INTO runs VALUES ('r1', 'nightly', '2026-11-01 00:00:00+00', '2026-11-01 00:10:00+00', 'complete', '{"totals":{"rows":5}}')`,
  `INSERT INTO windows VALUES ('r1', 'transactions', 'mainnet', '-', 1, 100, 5, 5, 0, 3, 0, 0, 0, 0, 'committed', NULL, '2026-11-01 00:09:00+00')`,
  `INSERT INTO watermarks VALUES ('mainnet', 'transactions', '-', 100, 'r1', '2026-11-01 00:09:00+00')`,
  `INSERT INTO request_usage VALUES ('2026-11-01', 'simulator', 'r1', 3)`,
];

/** The distributed control plane's ledger as chainlake created it before the one ledger (control-plane.ts CONTROL_DDL). */
const OLD_CONTROL_PLANE = [
  `CREATE SCHEMA chainlake`,
  `CREATE TABLE chainlake.runs (run_id TEXT PRIMARY KEY, job_name TEXT NOT NULL, network TEXT NOT NULL, job_doc JSONB NOT NULL, job_file TEXT NOT NULL,
     head BIGINT, range_from BIGINT NOT NULL, range_to BIGINT, ingested_at TEXT NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
     finished_at TIMESTAMPTZ, status TEXT NOT NULL DEFAULT 'running')`,
  `CREATE TABLE chainlake.windows (run_id TEXT NOT NULL REFERENCES chainlake.runs (run_id), window_id TEXT NOT NULL, dataset TEXT NOT NULL,
     network TEXT NOT NULL, scope_key TEXT NOT NULL, spec JSONB NOT NULL, job_id UUID NOT NULL, state TEXT NOT NULL DEFAULT 'queued',
     covered_from BIGINT, covered_to BIGINT, fragment_path TEXT, reject_path TEXT, rows BIGINT, rejects BIGINT, requests BIGINT,
     attempts INTEGER NOT NULL DEFAULT 0, error TEXT, worker TEXT, snapshot_id BIGINT, fetched_at TIMESTAMPTZ,
     updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW(), PRIMARY KEY (run_id, window_id))`,
  `CREATE INDEX windows_state ON chainlake.windows (state)`,
  `CREATE TABLE chainlake.watermarks (dataset TEXT NOT NULL, network TEXT NOT NULL, scope TEXT NOT NULL, block BIGINT NOT NULL,
     updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW(), PRIMARY KEY (dataset, network, scope))`,
  `CREATE TABLE chainlake.request_usage (account TEXT NOT NULL, day TEXT NOT NULL, requests BIGINT NOT NULL, PRIMARY KEY (account, day))`,
  `INSERT INTO chainlake.runs (run_id, job_name, network, job_doc, job_file, head, range_from, range_to, ingested_at, status)
     VALUES ('d1', 'dist', 'mainnet', '{"name":"dist"}', 'dist.json', 200, 1, 200, '2026-11-02T00:00:00.000Z', 'running')`,
  `INSERT INTO chainlake.windows (run_id, window_id, dataset, network, scope_key, spec, job_id, state, covered_from, covered_to, rows, attempts)
     VALUES ('d1', 'w-a', 'transactions', 'mainnet', '-', '{"range":{"from":1,"to":100}}', 'b1a7f5d2-0000-4000-8000-000000000001', 'committed', 1, 100, 7, 1),
            ('d1', 'w-b', 'transactions', 'mainnet', '-', '{"range":{"from":101,"to":200}}', 'b1a7f5d2-0000-4000-8000-000000000002', 'queued', NULL, NULL, NULL, 0)`,
  `INSERT INTO chainlake.watermarks (dataset, network, scope, block) VALUES ('transactions', 'mainnet', '-', 100)`,
  `INSERT INTO chainlake.request_usage (account, day, requests) VALUES ('acct', '2026-11-02', 40)`,
];

const ledgerColumns = (table: string) => LEDGER_TABLES.find((t) => t.name === table)!.columns.map((c) => c.name);

describe('the one ledger', () => {
  it('a local catalog of format 3 is migrated to format 4 in place: its rows kept, the shared columns added, idempotently', async () => {
    const paths = new LakePaths(path.join(tmp.dir, 'local'));
    const { mkdir } = await import('node:fs/promises');
    await mkdir(paths.root, { recursive: true });
    const instance = await DuckDBInstance.create(paths.catalog);
    const conn = await instance.connect();
    for (const sql of FORMAT_3) await conn.run(sql);
    conn.closeSync();
    instance.closeSync();

    const read = () =>
      Catalog.hold(paths, async (c) => {
        const q = (sql: string) => c.lake.query(sql);
        return {
          windows: await q(
            `SELECT run_id, window_id, scope, from_block, to_block, rows_got, status, attempts, committed_at IS NOT NULL AS committed FROM windows`,
          ),
          runs: await q(`SELECT run_id, job, status, network, job_doc, CAST(report AS VARCHAR) AS report FROM runs`),
          usage: await q(`SELECT CAST(day AS VARCHAR) AS day, account, run_id, requests FROM request_usage`),
          declared: await c.declaredTables(),
          legacy: await q(`SELECT key FROM lake_meta WHERE key LIKE 'table:%'`),
          columns: await q(
            `SELECT table_name AS t, column_name AS c FROM information_schema.columns WHERE table_catalog = current_database() ORDER BY ordinal_position`,
          ),
        };
      });
    const first = await read();
    expect(first.windows).toEqual([
      { run_id: 'r1', window_id: null, scope: '-', from_block: 1, to_block: 100, rows_got: 5, status: 'committed', attempts: 0, committed: true },
    ]);
    expect(first.runs).toEqual([{ run_id: 'r1', job: 'nightly', status: 'complete', network: null, job_doc: null, report: '{"totals":{"rows":5}}' }]);
    expect(first.usage).toEqual([{ day: '2026-11-01', account: 'simulator', run_id: 'r1', requests: 3 }]);
    // The declaration moved into the ledger, where compaction and the views (and a distributed lake's) read it.
    expect(first.declared).toEqual([DECLARED]);
    expect(first.legacy).toEqual([]);
    for (const table of ['runs', 'windows', 'watermarks', 'commits', 'declared_tables', 'request_usage']) {
      expect(new Set(first.columns.filter((r) => r.t === table).map((r) => r.c)), table).toEqual(new Set(ledgerColumns(table)));
    }
    // Opened again: nothing more to do, the same rows.
    const again = await read();
    expect(again.windows).toEqual(first.windows);
    expect(again.declared).toEqual([DECLARED]);
    expect(again.columns).toEqual(first.columns);
  });

  it('a local catalog of format 3 is read by the planner before any write migrates it (its runs name head and network in their report)', async () => {
    const paths = new LakePaths(path.join(tmp.dir, 'local-read'));
    const { mkdir } = await import('node:fs/promises');
    await mkdir(paths.root, { recursive: true });
    const instance = await DuckDBInstance.create(paths.catalog);
    const conn = await instance.connect();
    for (const sql of FORMAT_3) await conn.run(sql);
    await conn.run(
      `INSERT INTO runs VALUES ('r2', 'nightly', '2026-11-02 00:00:00+00', '2026-11-02 00:10:00+00', 'failed', '{"head":100,"network":"mainnet"}')`,
    );
    conn.closeSync();
    instance.closeSync();
    const engine = await openEngine({ tempDir: path.join(tmp.dir, 'local-read-engine') });
    try {
      const state = await readPlanningState(engine, paths, 'nightly', 'mainnet');
      expect(state.watermarks).toEqual(new Map([['transactions|mainnet|-', 100]]));
      expect(state.lastHead).toBe(100);
      expect(state.resume).toEqual({ runId: 'r2', status: 'failed', head: 100, committed: new Set() });
      expect(await readRequestUsage(engine, paths, 'simulator')).toEqual(new Map([['2026-11-01', 3]]));
    } finally {
      engine.close();
    }
  });

  it('a PostgreSQL control plane of the old columns is migrated under the setup lock: renamed, retyped, re-keyed, read alike by `query --catalog`', async () => {
    pg = await startPostgres();
    const db = await pg.database();
    const client = await db.connect();
    const store = path.join(tmp.dir, 'store');
    // An earlier chainlake's control plane beside its DuckLake catalog (a ledger of committed windows without its
    // catalog is refused: test/distributed/catalog-rebuild.test.ts).
    await setupControlPlane(client, `${store}/lake/`);
    await client.query('DROP SCHEMA chainlake CASCADE');
    for (const sql of OLD_CONTROL_PLANE) await client.query(sql);
    await setupControlPlane(client, `${store}/lake/`);
    await setupControlPlane(client, `${store}/lake/`);

    const windows = (
      await client.query(
        `SELECT window_id, scope, from_block::INT AS from_block, to_block::INT AS to_block, rows_got::INT AS rows_got, status, attempts FROM chainlake.windows ORDER BY window_id`,
      )
    ).rows;
    expect(windows).toEqual([
      { window_id: 'w-a', scope: '-', from_block: 1, to_block: 100, rows_got: 7, status: 'committed', attempts: 1 },
      { window_id: 'w-b', scope: '-', from_block: null, to_block: null, rows_got: null, status: 'queued', attempts: 0 },
    ]);
    const runs = (await client.query(`SELECT run_id, job, status, started_at IS NOT NULL AS started FROM chainlake.runs`)).rows;
    expect(runs).toEqual([{ run_id: 'd1', job: 'dist', status: 'running', started: true }]);
    const usage = (
      await client.query(`SELECT pg_typeof(day)::TEXT AS type, CAST(day AS TEXT) AS day, account, run_id, requests::INT AS n FROM chainlake.request_usage`)
    ).rows;
    expect(usage).toEqual([{ type: 'date', day: '2026-11-02', account: 'acct', run_id: '', n: 40 }]);
    const key = (
      await client.query(
        `SELECT string_agg(k.column_name, ',' ORDER BY k.column_name) AS cols FROM information_schema.table_constraints tc
         JOIN information_schema.key_column_usage k USING (constraint_schema, constraint_name)
         WHERE tc.table_schema = 'chainlake' AND tc.table_name = 'request_usage' AND tc.constraint_type = 'PRIMARY KEY'`,
      )
    ).rows[0].cols;
    expect(key).toBe('account,day,run_id');
    // A local run's row (no job document, no range) fits the migrated table.
    await client.query(`INSERT INTO chainlake.runs (run_id, job, status) VALUES ('local-shaped', 'x', 'complete')`);
    for (const table of ['runs', 'windows', 'watermarks', 'commits', 'declared_tables', 'request_usage']) {
      const cols = (
        await client.query(`SELECT column_name AS c FROM information_schema.columns WHERE table_schema = 'chainlake' AND table_name = $1`, [table])
      ).rows.map((r) => r.c as string);
      expect(new Set(cols), table).toEqual(new Set(ledgerColumns(table)));
    }
    const indexes = (await client.query(`SELECT indexname FROM pg_indexes WHERE schemaname = 'chainlake' AND tablename = 'windows' ORDER BY 1`)).rows;
    expect(indexes.map((r) => r.indexname)).not.toContain('windows_state');

    // The reader (`query --catalog`, `status --catalog`): the ledger's tables in the one vocabulary.
    const lake = await openDistributedLake({ catalog: db.url, store, datasets: false });
    try {
      const r = await lake.conn.runAndReadAll(`SELECT window_id, scope, from_block, to_block, status FROM windows ORDER BY window_id`);
      expect(r.getRowObjectsJS()).toEqual([
        { window_id: 'w-a', scope: '-', from_block: 1n, to_block: 100n, status: 'committed' },
        // Its planned range, from the spec an earlier chainlake left it in.
        { window_id: 'w-b', scope: '-', from_block: 101n, to_block: 200n, status: 'queued' },
      ]);
      const cols = (await lake.conn.runAndReadAll(`SELECT * FROM runs LIMIT 0`)).columnNames();
      expect(cols).toEqual(ledgerColumns('runs'));
    } finally {
      lake.close();
    }
  }, 120_000);
});
