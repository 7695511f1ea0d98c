import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { runWorker } from '../../src/distributed/worker.js';
import { silentLogger } from '../../src/pipeline/log.js';
import { CLI, onJsonLines, runCliCapturing, type CliResult } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';
import { reportData } from '../report/helpers.js';

let pg: TestPostgres;
let tmp: Awaited<ReturnType<typeof tempDir>>;
let jobFile: string;

const SECOND_ADDRESS = '0x86024fd52bd9a84f6ba8cb499555b9ce10959591';

const SMALL_JOB = {
  name: 'distributed-small',
  network: 'mainnet',
  target: 'simulator',
  simulator: { seed: 1, scale: 'small' },
  range: { fromBlock: 0, toBlock: 'head' },
  concurrency: 4,
  dailyRequestQuota: 100_000,
  // Never stored by enqueue (each worker's key comes from its own environment).
  apiKey: 'job-file-secret-key',
  datasets: {
    transactions: { addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c', '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157'] },
    balances: { addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c'] },
  },
};

beforeAll(async () => {
  pg = await startPostgres();
  // For the workers run as functions here (the CLI's runs are given their environment per call).
  tmp = await tempDir('chainlake-distributed-cli-');
  jobFile = path.join(tmp.dir, 'small.json');
  await writeFile(jobFile, JSON.stringify(SMALL_JOB));
}, 120_000);

afterAll(async () => {
  await pg?.stop();
  await tmp?.cleanup();
});

/**
 * A command whose output and exit code are the point, not its process, run in this process (a child's start costs
 * more than most of these commands), with `env` set for the call and restored after. Everything the command writes
 * is captured, so a password printed anywhere is seen.
 */
async function inProcess(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return runCliCapturing(args, env);
}

describe('distributed mode through the CLI', () => {
  it('names what to fix when the catalog or store is wrong (exit 2), never printing a password', async () => {
    const store = path.join(tmp.dir, 'store-bad');
    const missing = await inProcess(['worker', '--store', store], { CHAINLAKE_CATALOG: '' });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--catalog is required/);

    const notPg = await inProcess(['enqueue', jobFile, '--catalog', 'mysql://db/lake', '--store', store]);
    expect(notPg.code).toBe(2);
    expect(notPg.stderr).toMatch(/not a PostgreSQL URL/);

    const db = await pg.database();
    const wrong = db.url.replace('postgres@', 'postgres:hunter2-secret@');
    // A worker's command installs its signal handlers before it connects, and removes them however it ends: a
    // failing worker run in process leaves this process's handlers as they were.
    const handlers = () => ({ SIGINT: process.listenerCount('SIGINT'), SIGTERM: process.listenerCount('SIGTERM') });
    const before = handlers();
    const refused = await inProcess(['worker', '--catalog', wrong, '--store', store, '--until-idle'], { PGPASSWORD: '' });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/cannot connect to the catalog postgres:\/\/postgres:\*\*\*@127\.0\.0\.1/);
    expect(refused.stderr + refused.stdout).not.toMatch(/hunter2/);
    expect(handlers()).toEqual(before);

    // An object store that cannot be reached (nothing listens on the discard port) is named with what to check.
    const s3 = await inProcess(['worker', '--catalog', db.url, '--store', 's3://bucket/lake'], {
      PGPASSWORD: pg.password,
      AWS_ENDPOINT_URL: 'http://127.0.0.1:9',
      AWS_ACCESS_KEY_ID: 'x',
      AWS_SECRET_ACCESS_KEY: 'y',
      AWS_MAX_ATTEMPTS: '1',
    });
    expect(s3.code).toBe(2);
    expect(handlers()).toEqual(before);
    expect(s3.stderr).toMatch(/--store s3:\/\/bucket\/lake: cannot reach bucket bucket/);
    expect(s3.stderr).toMatch(/AWS_ENDPOINT_URL/);
    const ftp = await inProcess(['worker', '--catalog', db.url, '--store', 'ftp://host/lake'], { PGPASSWORD: pg.password });
    expect(ftp.code).toBe(2);
    expect(ftp.stderr).toMatch(/not a directory path or s3:\/\/ location/);

    const asOf = await inProcess(['query', '--as-of', 'yesterday', 'SELECT 1']);
    expect(asOf.code).toBe(2);
    expect(asOf.stderr).toMatch(/--as-of yesterday is neither a snapshot id nor a time/);
  }, 120_000);

  it('workers started at once on a new database all come up (one sets the control plane and queue up, the others wait)', async () => {
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store-fresh');
    // Four workers in this process, each on its own connections: what is raced is the control plane's set-up in
    // PostgreSQL, not a process. Each one comes up, finds nothing queued and ends.
    const started = await Promise.all(
      [1, 2, 3, 4].map((i) => runWorker({ catalog: db.url, store, id: `fresh-${i}`, untilIdle: true, pollMs: 50, log: silentLogger })),
    );
    expect(started.map((r) => ({ worker: r.worker, fetched: r.windowsFetched, failed: r.windowsFailed, setup: r.setupProblem }))).toEqual(
      [1, 2, 3, 4].map((i) => ({ worker: `fresh-${i}`, fetched: 0, failed: 0, setup: undefined })),
    );
  }, 120_000);

  it('enqueue, a worker serving metrics, query --catalog and --as-of an earlier snapshot, maintain', async () => {
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store');
    const env = { PGPASSWORD: pg.password };
    const enq = await inProcess(['enqueue', jobFile, '--catalog', db.url, '--store', store], env);
    expect(enq.code, enq.stderr).toBe(0);
    const queued = JSON.parse(enq.stdout) as { run: string; queued: number };
    expect(queued.queued).toBeGreaterThan(1);
    const control = await db.connect();
    const stored = (await control.query(`SELECT job_doc::text AS doc FROM chainlake.runs`)).rows[0].doc as string;
    expect(stored).toContain('distributed-small');
    expect(stored).not.toContain('job-file-secret-key');

    // A worker that stays up (no --until-idle): metrics are read once it says every run is done.
    const child = spawn(
      process.execPath,
      [CLI, 'worker', '--catalog', db.url, '--store', store, '--poll-ms', '100', '--metrics-port', '0', '--log-format', 'json', '--verbose'],
      { env: { ...process.env, ...env, CHAINLAKE_API_KEY: '' }, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    const killer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    let url = '';
    const idles: Record<string, unknown>[] = [];
    // The worker's log, shown when it never goes idle (what it was doing when it was stopped).
    const lines: string[] = [];
    let wake: (() => void) | undefined;
    onJsonLines(child.stderr!, (ev) => {
      lines.push(JSON.stringify(ev));
      if (ev.event === 'worker.metrics') url = String(ev.url);
      if (ev.event === 'worker.idle') {
        idles.push(ev);
        wake?.();
      }
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    /** The worker's n-th `worker.idle` event (it logs one each time it runs out of work). */
    const idle = async (n: number) => {
      while (idles.length < n)
        await Promise.race([
          new Promise<void>((resolve) => (wake = resolve)),
          exited.then(() => Promise.reject(new Error(`worker exited; its log:\n${lines.slice(-60).join('\n')}`))),
        ]);
      return idles[n - 1]!;
    };
    const idleReport = await idle(1);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    const value = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(metrics)?.[1]);
    expect(value('chainlake_worker_windows_total')).toBe(idleReport.windowsFetched);
    expect(value('chainlake_worker_windows_committed_total')).toBe(idleReport.windowsCommitted);
    expect(value('chainlake_worker_requests_total')).toBe(idleReport.requests);
    expect(value('chainlake_windows_queued')).toBe(0);
    expect(value('chainlake_windows_fetched')).toBe(0);
    expect(value('chainlake_commit_lag_seconds')).toBe(0);
    // The quota as PostgreSQL counts it: what was sent, plus what is reserved and not yet given back (< a block).
    const used = value('chainlake_quota_used_requests');
    expect(used).toBeGreaterThanOrEqual(Number(idleReport.requests));
    expect(used).toBeLessThan(Number(idleReport.requests) + 50);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    // /report: the distributed lake's page, as `chainlake report --catalog` draws it, from the control plane's ledger.
    const page = await fetch(`${url}/report`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const served = reportData(await page.text());
    expect(served.kind).toBe('distributed');
    const ledgerRuns = (await control.query(`SELECT run_id, status FROM chainlake.runs ORDER BY run_id`)).rows as { run_id: string; status: string }[];
    expect(served.runs.map((r) => ({ run_id: r.run_id, status: r.status })).sort((a, b) => a.run_id.localeCompare(b.run_id))).toEqual(ledgerRuns);
    const ledgerWindows = Number((await control.query(`SELECT count(*) AS n FROM chainlake.windows`)).rows[0].n);
    expect(served.coverage.reduce((n, lane) => n + lane.windows.length, 0)).toBe(ledgerWindows);
    expect(served.datasets.map((d) => d.dataset).sort()).toEqual(['balances', 'transactions']);

    const count = async (...extra: string[]) => {
      const r = await inProcess(['query', '--catalog', db.url, ...extra, '--format', 'csv', 'SELECT count(*) AS n FROM transactions'], env);
      expect(r.code, r.stderr).toBe(0);
      return Number(r.stdout.trim().split('\n')[1]);
    };
    const before = await count();
    expect(before).toBeGreaterThan(0);
    const snapshot = Number((await control.query(`SELECT max(snapshot_id) AS s FROM ducklake.ducklake_snapshot`)).rows[0].s);

    // A second job (another address) through the same worker: the lake grows; the first snapshot still reads as it was.
    const second = path.join(tmp.dir, 'second.json');
    await writeFile(second, JSON.stringify({ ...SMALL_JOB, name: 'distributed-second', datasets: { transactions: { addresses: [SECOND_ADDRESS] } } }));
    const enq2 = await inProcess(['enqueue', second, '--catalog', db.url, '--store', store], env);
    expect(enq2.code, enq2.stderr).toBe(0);
    await idle(2);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    clearTimeout(killer);
    const now = await count();
    expect(now).toBeGreaterThan(before);
    expect(await count('--as-of', String(snapshot))).toBe(before);
    const bad = await inProcess(['query', '--catalog', db.url, '--as-of', 'yesterday', 'SELECT 1'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--as-of yesterday is neither a snapshot id nor a time/);

    // Expiring every snapshot but the newest frees the files only older snapshots read; the newest reads the same.
    const m = await inProcess(['maintain', '--catalog', db.url, '--store', store, '--keep-snapshots', '1'], env);
    expect(m.code, m.stderr).toBe(0);
    expect(m.stdout).toMatch(/expired \d+ snapshots, deleted [1-9]\d* files/);
    expect(await count()).toBe(now);
    const gone = await inProcess(['query', '--catalog', db.url, '--as-of', String(snapshot), 'SELECT 1'], env);
    expect(gone.code).toBe(2);
  }, 240_000);
});
