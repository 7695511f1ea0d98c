import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import type { RunReport } from '../../src/pipeline/report.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { runWorker } from '../../src/distributed/worker.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { runCli, runCliInProcess } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

const A = '0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c';
/** A key no catalog may hold: distinctive, so a search of the catalog's bytes finds it wherever it is. */
const KEY = 'lineage-secret-key-7f3a9c21';

/** Transactions of one address in windows of 20,000 blocks and pages of 100, and its balance (a POST, no range). */
const doc = {
  name: 'lineage',
  network: 'mainnet',
  target: 'simulator',
  simulator: { seed: 1, scale: 'small' },
  range: { fromBlock: 0, toBlock: 'head', windowBlocks: 20_000 },
  datasets: { transactions: { addresses: [A] }, balances: { addresses: [A] } },
  pageSize: 100,
};

interface Explained {
  runId: string;
  row: Record<string, unknown>;
  windows: { window: Record<string, unknown>; requests: Record<string, unknown>[] }[];
  notes: string[];
}

/** `chainlake explain` of a lake's transaction (the built CLI), checked against the lake's own ledger. */
async function explainTransaction(lakeFlags: string[], env: NodeJS.ProcessEnv, hash: string, block: number, runId: string): Promise<Explained> {
  const r = await runCli(['explain', 'transactions', hash, ...lakeFlags, '--format', 'json'], { env });
  expect(r.code, r.stderr).toBe(0);
  const e = JSON.parse(r.stdout) as Explained;
  expect(e.row.transaction_hash).toBe(hash);
  expect(e.runId).toBe(runId);
  expect(e.windows.length).toBeGreaterThanOrEqual(1);
  for (const { window: w, requests } of e.windows) {
    expect(w.scope).toBe(`address=${A}`);
    expect(w.status).toBe('committed');
    expect(Number(w.from_block)).toBeLessThanOrEqual(block);
    expect(Number(w.to_block)).toBeGreaterThanOrEqual(block);
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.reduce((n, q) => n + Number(q.attempts), 0)).toBe(Number(w.requests));
    for (const q of requests) {
      expect(q.endpoint).toBe('account_transactions');
      expect(JSON.parse(String(q.params))).toMatchObject({ startBlock: String(w.from_block), endBlock: String(w.to_block) });
    }
  }
  return e;
}

describe('lineage on a local lake: every window its calls, in the catalog (real simulator, real DuckDB)', () => {
  let sim: RunningSimulator;
  let tmp: Awaited<ReturnType<typeof tempDir>>;
  let lake: string;
  let report: RunReport;

  beforeAll(async () => {
    sim = await startSimulator({ seed: 1, scale: 'small', apiKey: KEY });
    tmp = await tempDir('chainlake-lineage-');
    lake = path.join(tmp.dir, 'lake');
    report = await runJob(parseJob(doc, 'lineage', process.env, { lake }), { simulator: sim });
  }, 120_000);

  afterAll(async () => {
    await sim?.close();
    await tmp?.cleanup();
  });

  it('records one row per call of each window, as many as the report counts, and never the API key', async () => {
    expect(report.status).toBe('complete');
    const windows = await queryCatalog(lake, `SELECT window_id, requests FROM windows WHERE run_id = '${report.runId}' ORDER BY window_id`);
    expect(windows.length).toBeGreaterThan(1);
    const calls = await queryCatalog(
      lake,
      `SELECT window_id, count(*)::BIGINT AS calls, sum(attempts)::BIGINT AS attempts FROM requests WHERE run_id = '${report.runId}' GROUP BY window_id ORDER BY window_id`,
    );
    // Every window has its calls, and a window's attempts are the requests its record counts.
    expect(calls.map((c) => [c.window_id, Number(c.attempts)])).toEqual(windows.map((w) => [w.window_id, Number(w.requests)]));
    const all = await queryCatalog(lake, `SELECT * FROM requests WHERE run_id = '${report.runId}'`);
    // The report's figure: every request of the run, less those outside its windows (the head pin).
    expect(all.reduce((n, r) => n + Number(r.attempts), 0)).toBe(report.totals.requests - report.outsideWindows.requests);
    expect(all.length).toBe(report.totals.requests - report.outsideWindows.requests);
    expect(new Set(all.map((r) => r.endpoint))).toEqual(new Set(['account_transactions', 'balances']));
    for (const r of all) {
      expect(r.http_status).toBe(200);
      expect(r.body_sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(Number(r.bytes)).toBeGreaterThan(0);
    }
    // The rows the calls brought are the rows the windows hold.
    const rows = await queryCatalog(lake, `SELECT sum(rows_got)::BIGINT AS n FROM windows WHERE run_id = '${report.runId}'`);
    expect(all.reduce((n, r) => n + Number(r.rows), 0)).toBe(Number(rows[0]!.n));
    // No API key anywhere in the catalog's file, nor in the lake's other files.
    const catalog = await readFile(path.join(lake, 'catalog.duckdb'));
    expect(catalog.includes(Buffer.from(KEY))).toBe(false);
    // DuckDB may compress a text in its file: the ledger's tables are read back whole, too.
    for (const table of ['runs', 'windows', 'requests', 'watermarks', 'commits', 'lake_meta']) {
      const text = JSON.stringify(await queryCatalog(lake, `SELECT * FROM ${table}`), (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
      expect(text, table).not.toContain(KEY);
    }
  });

  it("records the body's sha256: the simulator's body for the same call hashes the same", async () => {
    const [call] = await queryCatalog(
      lake,
      `SELECT path, params, body_sha256 FROM requests WHERE run_id = '${report.runId}' AND endpoint = 'account_transactions' ORDER BY window_id, seq LIMIT 1`,
    );
    const params = JSON.parse(String(call!.params)) as Record<string, string>;
    expect(params.offset).toBe('0');
    const url = new URL(String(call!.path), sim.urls.mainnet);
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    const res = await request(url, { headers: { 'api-key': KEY, accept: 'application/json' } });
    const body = Buffer.from(await res.body.arrayBuffer());
    expect(res.statusCode).toBe(200);
    expect(createHash('sha256').update(body).digest('hex')).toBe(call!.body_sha256);
  });

  it('explain traces a row to its window and its requests; a snapshot row by --key; text for a person', async () => {
    const [tx] = await queryCatalog(lake, `SELECT transaction_hash, block_number FROM transactions ORDER BY block_number DESC LIMIT 1`);
    await explainTransaction(['--lake', lake], {}, String(tx!.transaction_hash), Number(tx!.block_number), report.runId);
    const text = await runCli(['explain', 'transactions', String(tx!.transaction_hash).toUpperCase().replace('0X', '0x'), '--lake', lake]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`window transactions/mainnet/address=${A}/\\d+-\\d+`));
    expect(text.stdout).toMatch(
      /#0 account_transactions: GET \/mainnet\/v1\/accounts\/0x[0-9a-f]{40}\/transactions \{.*"offset":"0".*\} -> HTTP 200, 1 attempt, \d+ rows/,
    );
    const balance = await runCli(['explain', 'balances', '--key', `address=${A}`, '--lake', lake, '--format', 'json']);
    expect(balance.code, balance.stderr).toBe(0);
    const b = JSON.parse(balance.stdout) as Explained;
    expect(b.windows).toHaveLength(1);
    expect(b.windows[0]!.window.scope).toBe(`addresses=${A}`);
    expect(b.windows[0]!.requests.map((q) => [q.endpoint, q.method, q.http_status])).toEqual([['balances', 'POST', 200]]);
  });

  it('explain of an unknown dataset, column or key exits 2 saying what and how to fix it', async () => {
    const dataset = await runCliInProcess(['explain', 'transaction', '0xabc', '--lake', lake]);
    expect(dataset.code).toBe(2);
    expect(dataset.stderr).toMatch(/unknown dataset 'transaction': did you mean 'transactions'\?/);
    const column = await runCliInProcess(['explain', 'transactions', '--key', 'transaction_hsh=0xabc', '--lake', lake]);
    expect(column.code).toBe(2);
    expect(column.stderr).toMatch(/has no column 'transaction_hsh': did you mean 'transaction_hash'\?/);
    const key = await runCliInProcess(['explain', 'transactions', `0x${'0'.repeat(64)}`, '--lake', lake]);
    expect(key.code).toBe(2);
    expect(key.stderr).toMatch(/no row of transactions has transaction_hash = 0x0{64}/);
  });
});

describe('lineage on a distributed lake (real PostgreSQL, real workers)', () => {
  let pg: TestPostgres;
  let sim: RunningSimulator;
  let tmp: Awaited<ReturnType<typeof tempDir>>;

  beforeAll(async () => {
    pg = await startPostgres();
    sim = await startSimulator({ seed: 1, scale: 'small', apiKey: KEY });
    tmp = await tempDir('chainlake-lineage-pg-');
  }, 120_000);

  afterAll(async () => {
    await sim?.close();
    await pg?.stop();
    await tmp?.cleanup();
  });

  it("the commit records each window's calls in chainlake.requests, never the key, and explain follows a row to them", async () => {
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store');
    const distDoc = { ...doc, datasets: { transactions: { addresses: [A] } } };
    await enqueueJob(parseJob(distDoc, 'lineage', process.env), distDoc, { catalog: db.url, store, simulator: sim });
    await runWorker({ catalog: db.url, store, id: 'w1', untilIdle: true, pollMs: 50, simulator: sim });
    const client = await db.connect();
    let runId: string;
    try {
      const windows = (await client.query(`SELECT run_id, window_id, requests, status, request_log FROM chainlake.windows ORDER BY window_id`)).rows;
      expect(windows.length).toBeGreaterThan(1);
      runId = String(windows[0].run_id);
      const calls = (await client.query(`SELECT window_id, sum(attempts)::int AS attempts FROM chainlake.requests GROUP BY window_id ORDER BY window_id`)).rows;
      expect(calls.map((c) => [c.window_id, c.attempts])).toEqual(windows.map((w) => [w.window_id, Number(w.requests)]));
      for (const w of windows) {
        expect(w.status).toBe('committed');
        // Carried to the commit, then moved: the windows' rows no longer hold them.
        expect(w.request_log).toBeNull();
      }
      // No key in any table of the control plane or the catalog.
      const tables = (await client.query(`SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema IN ('chainlake', 'ducklake')`))
        .rows;
      expect(tables.map((t) => t.table_name)).toContain('requests');
      for (const t of tables) {
        const hits = await client.query(`SELECT count(*)::int AS n FROM ${t.table_schema}.${t.table_name} x WHERE x::text LIKE $1`, [`%${KEY}%`]);
        expect(hits.rows[0].n, `${t.table_schema}.${t.table_name}`).toBe(0);
      }
    } finally {
      await client.end();
    }
    const lake = await runCli(
      [
        'query',
        '--catalog',
        db.url,
        '--store',
        store,
        '--format',
        'json',
        `SELECT transaction_hash, block_number FROM transactions ORDER BY block_number LIMIT 1`,
      ],
      {
        env: { PGPASSWORD: pg.password },
      },
    );
    expect(lake.code, lake.stderr).toBe(0);
    const tx = JSON.parse(lake.stdout) as { transaction_hash: string; block_number: number };
    await explainTransaction(['--catalog', db.url, '--store', store], { PGPASSWORD: pg.password }, tx.transaction_hash, Number(tx.block_number), runId);
  }, 240_000);
});
