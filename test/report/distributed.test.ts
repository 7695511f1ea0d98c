import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { runWorker } from '../../src/distributed/worker.js';
import { lakeReport } from '../../src/index.js';
import { parseJob } from '../../src/pipeline/job.js';
import { startSimulator } from '../../src/simulator/index.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';
import { reportData } from './helpers.js';

// Issue 37: `chainlake report --catalog` draws a distributed lake with the sections of a local one, from its
// control plane's ledger and its DuckLake catalog in PostgreSQL.

const A = '0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c';
const C = '0x86024fd52bd9a84f6ba8cb499555b9ce10959591';

const jobDoc = (name: string, address: string, extra: Record<string, unknown> = {}) => ({
  name,
  network: 'mainnet',
  target: 'simulator',
  simulator: { seed: 1, scale: 'small' },
  range: { fromBlock: 0, toBlock: 'head' },
  datasets: { transactions: { addresses: [address] } },
  ...extra,
});

describe('chainlake report of a distributed lake (real PostgreSQL)', () => {
  let pg: TestPostgres;
  let tmp: Awaited<ReturnType<typeof tempDir>>;
  let db: Awaited<ReturnType<TestPostgres['database']>>;
  let store: string;

  beforeAll(async () => {
    pg = await startPostgres();
    tmp = await tempDir('chainlake-report-dist-');
    db = await pg.database();
    store = path.join(tmp.dir, 'store');
    // One run under a daily quota, and one whose window fails (every request of its worker answered 500).
    const doc = jobDoc('dist-a', A, { dailyRequestQuota: 50_000 });
    await enqueueJob(parseJob(doc, 'dist-a', process.env), doc, { catalog: db.url, store });
    await runWorker({ catalog: db.url, store, id: 'a', untilIdle: true, pollMs: 50 });
    const healthy = await startSimulator({ seed: 1, scale: 'small' });
    const failing = await startSimulator({ seed: 1, scale: 'small', faults: { rate: 1, kinds: ['500'] } });
    try {
      const bad = jobDoc('dist-fails', C, { retry: { maxAttempts: 1 } });
      await enqueueJob(parseJob(bad, 'dist-fails', process.env), bad, { catalog: db.url, store, simulator: healthy, queue: { retryLimit: 0 } });
      await runWorker({ catalog: db.url, store, id: 'fails', untilIdle: true, pollMs: 50, simulator: failing });
    } finally {
      await failing.close();
      await healthy.close();
    }
  }, 300_000);

  afterAll(async () => {
    await pg?.stop();
    await tmp?.cleanup();
  });

  it('has the sections of a local lake, drawn from the ledger: windows row for row, runs, requests against the quota, snapshots', async () => {
    const html = await lakeReport({ catalog: db.url, store });
    const d = reportData(html);
    expect(d.kind).toBe('distributed');
    expect(d.lake).toBe(db.url);
    for (const id of ['headline', 'coverage', 'runs', 'requests', 'rows-per-day', 'rejects', 'snapshots']) expect(html).toContain(`<section id="${id}">`);

    const c = await db.connect();
    try {
      const windows = (
        await c.query<{ dataset: string; scope: string; run_id: string; status: string; f: string | null; t: string | null }>(
          `SELECT dataset, scope, run_id, status, coalesce(from_block, (spec->'range'->>'from')::BIGINT)::TEXT AS f,
                  coalesce(to_block, (spec->'range'->>'to')::BIGINT)::TEXT AS t FROM chainlake.windows`,
        )
      ).rows;
      const drawn = d.coverage.flatMap((l) => l.windows.map((w) => [l.dataset, l.scope, w.run_id, w.status, String(w.from), String(w.to)].join('|')));
      expect(drawn.sort()).toEqual(windows.map((w) => [w.dataset, w.scope, w.run_id, w.status, w.f, w.t].join('|')).sort());
      expect(d.coverage.flatMap((l) => l.windows.filter((w) => w.status === 'failed').map(() => l.scope))).toContain(`address=${C}`);
      expect(d.headline.ok).toBe(false);
      expect(d.headline.summary).toMatch(/^\d+ failed windows? not yet fetched again/);

      const runs = (await c.query<{ run_id: string; job: string; status: string }>(`SELECT run_id, job, status FROM chainlake.runs ORDER BY started_at`)).rows;
      expect(d.runs.map((r) => [r.run_id, r.job, r.status])).toEqual(runs.map((r) => [r.run_id, r.job, r.status]));
      const rows = (await c.query<{ n: string }>(`SELECT coalesce(sum(rows_got), 0)::TEXT AS n FROM chainlake.windows WHERE run_id = $1`, [runs[0]!.run_id]))
        .rows;
      expect(d.runs[0]!.rows).toBe(Number(rows[0]!.n));
      expect(d.runs[0]!.rows).toBeGreaterThan(0);

      const usage = (
        await c.query<{ day: string; requests: string }>(
          `SELECT CAST(day AS TEXT) AS day, sum(requests)::TEXT AS requests FROM chainlake.request_usage GROUP BY day ORDER BY day`,
        )
      ).rows;
      expect(usage.length).toBeGreaterThan(0);
      expect(d.requests).toEqual({ source: 'ledger', quota: 50_000, days: usage.map((u) => ({ day: u.day, requests: Number(u.requests) })) });

      const snaps = (
        await c.query<{ n: string; current: string }>(`SELECT count(*)::TEXT AS n, max(snapshot_id)::TEXT AS current FROM ducklake.ducklake_snapshot`)
      ).rows;
      expect([d.snapshots.count, d.snapshots.current]).toEqual([Number(snaps[0]!.n), Number(snaps[0]!.current)]);
      const perDay = d.rows_per_day.filter((r) => r.dataset === 'transactions').reduce((n, r) => n + r.rows, 0);
      expect(perDay).toBe(d.datasets.find((x) => x.dataset === 'transactions')!.rows);
    } finally {
      await c.end();
    }
  });

  it('the CLI: report --catalog to stdout', async () => {
    const r = await runCli(['report', '--catalog', db.url, '--store', store, '-o', '-'], { env: { PGPASSWORD: pg.password } });
    expect(r.code, r.stderr).toBe(0);
    expect(reportData(r.stdout).kind).toBe('distributed');
    expect(r.stdout).not.toContain(pg.password);
  });
});
