import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import type { RunReport } from '../../src/pipeline/report.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

const A = '0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c';
/** A key no catalog may hold: distinctive, so a search of the catalog's bytes finds it wherever it is. */
const KEY = 'lineage-secret-key-7f3a9c21';

describe('lineage on a local lake: every window its calls, in the catalog (real simulator, real DuckDB)', () => {
  let sim: RunningSimulator;
  let tmp: Awaited<ReturnType<typeof tempDir>>;
  let lake: string;
  let report: RunReport;

  beforeAll(async () => {
    sim = await startSimulator({ seed: 1, scale: 'small', apiKey: KEY });
    tmp = await tempDir('chainlake-lineage-');
    lake = path.join(tmp.dir, 'lake');
    const doc = {
      name: 'lineage',
      network: 'mainnet',
      target: 'simulator',
      simulator: { seed: 1, scale: 'small' },
      range: { fromBlock: 0, toBlock: 'head', windowBlocks: 20_000 },
      datasets: { transactions: { addresses: [A] }, balances: { addresses: [A] } },
      pageSize: 100,
    };
    report = await runJob({ ...parseJob(doc, 'lineage'), lake }, { simulator: sim });
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
});
