import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunReport } from '../../src/pipeline/report.js';
import { CLI, onJsonLines } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

// Issue 22 (observability): `chainlake schedule --metrics-port` serves /metrics in Prometheus format with each
// run's own figures, and /healthz, which turns 503 naming the job whose last run needs a person.
let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => ({ dir, cleanup } = await tempDir()));
afterAll(async () => cleanup?.());

/** A six-field cron expression that fires once, `seconds` from now (then not again for a day). */
function onceIn(seconds: number): string {
  const t = new Date(Date.now() + seconds * 1000);
  return `${t.getUTCSeconds()} ${t.getUTCMinutes()} ${t.getUTCHours()} * * *`;
}

async function refusedPort(): Promise<number> {
  const s = createServer().listen(0, '127.0.0.1');
  await new Promise((r) => s.once('listening', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** The value of one sample of the Prometheus text, e.g. sample(text, 'chainlake_requests_total{job="a"}'). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('chainlake schedule --metrics-port', () => {
  it('serves each run’s figures on /metrics, and /healthz names the job whose last run failed', async () => {
    const lake = path.join(dir, 'lake');
    // Far enough ahead for a loaded machine to have started the scheduler; a missed firing fails the test by timeout.
    const cron = onceIn(8);
    const good = path.join(dir, 'good.json');
    await writeFile(
      good,
      JSON.stringify({
        name: 'good',
        target: 'simulator',
        lake,
        schedule: cron,
        range: { fromBlock: 0, toBlock: 6000 },
        datasets: {
          transactions: { addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c', '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157'] },
        },
      }),
    );
    const bad = path.join(dir, 'bad.json');
    await writeFile(
      bad,
      JSON.stringify({
        name: 'bad',
        target: 'api',
        endpoints: { mainnet: `http://127.0.0.1:${await refusedPort()}` },
        apiKey: 'k',
        retry: { maxAttempts: 2, baseDelayMs: 5 },
        lake: path.join(dir, 'bad-lake'),
        schedule: cron,
        datasets: { transactions: { addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c'] } },
      }),
    );
    const child = spawn(process.execPath, [CLI, 'schedule', good, bad, '--log-format', 'json', '--metrics-port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let url = '';
    const finished: Record<string, unknown>[] = [];
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`two runs did not finish within 90 s:\n${stderr}`)), 90_000);
        onJsonLines(child.stderr, (ev) => {
          if (ev.event === 'schedule.metrics') url = String(ev.url);
          if (ev.event === 'schedule.finish') finished.push(ev);
          if (finished.length === 2) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(finished.map((f) => [path.basename(String(f.file)), f.exitCode]).sort()).toEqual([
        ['bad.json', 2],
        ['good.json', 0],
      ]);

      const [row] = await queryCatalog(lake, "SELECT report::VARCHAR AS report FROM runs WHERE status = 'complete'");
      const report = JSON.parse(String(row!.report)) as RunReport;
      const res = await fetch(`${url}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      const text = await res.text();
      expect(sample(text, 'chainlake_runs_total{job="good",status="complete"}')).toBe(1);
      expect(sample(text, 'chainlake_runs_total{job="bad",status="exit_2"}')).toBe(1);
      expect(sample(text, 'chainlake_requests_total{job="good"}')).toBe(report.totals.requests);
      expect(sample(text, 'chainlake_windows_total{job="good",state="done"}')).toBe(report.totals.windows - report.totals.windowsFailed);
      const tx = report.datasets.find((d) => d.dataset === 'transactions')!;
      expect(tx.rows).toBeGreaterThan(0);
      expect(sample(text, 'chainlake_rows_fetched_total{job="good",dataset="transactions"}')).toBe(tx.rows);
      expect(sample(text, 'chainlake_rows_landed_total{job="good",dataset="transactions"}')).toBe(tx.landed);
      const [lakeRows] = await queryCatalog(lake, 'SELECT count(*)::INT AS n FROM transactions');
      expect(tx.landed).toBe(lakeRows!.n);
      expect(sample(text, 'chainlake_last_run_exit_code{job="bad"}')).toBe(2);
      expect(sample(text, 'chainlake_runs_in_progress{job="good"}')).toBe(0);
      expect(text).not.toContain('127.0.0.1:'); // no URL of an API in a label

      const health = await fetch(`${url}/healthz`);
      expect(health.status).toBe(503);
      const body = await health.text();
      expect(body).toMatch(/^bad: last run exit_2 \(exit 2\)/);
      expect(body).not.toContain('good');
      expect((await fetch(`${url}/nothing`)).status).toBe(404);
    } finally {
      const code = await new Promise<number | null>((resolve) => {
        child.on('close', resolve);
        child.kill('SIGTERM');
      });
      expect(code).toBe(0);
    }
  }, 120_000);

  it('a bad --metrics-port is a usage error (exit 2)', async () => {
    const { runCli } = await import('../helpers/cli.js');
    const job = path.join(dir, 'any.json');
    await writeFile(job, JSON.stringify({ name: 'any', target: 'simulator', lake: path.join(dir, 'any'), schedule: '0 0 * * *', datasets: { dashboard: {} } }));
    const r = await runCli(['schedule', job, '--metrics-port', '70000']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--metrics-port: expected a port number from 0 to 65535');
  });
});
