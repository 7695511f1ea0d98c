import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lakeReport } from '../../src/index.js';
import { parseJob } from '../../src/pipeline/job.js';
import type { RunReport } from '../../src/pipeline/report.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator } from '../../src/simulator/index.js';
import { CLI, onJsonLines, runCli } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { reportData } from './helpers.js';

// Issue 37: `chainlake report` draws a lake as one self-contained HTML page; what it draws is the catalog's.

const CHROMIUM = '/usr/bin/chromium';
const noBrowser = existsSync(CHROMIUM)
  ? undefined
  : `${CHROMIUM} is absent: the report's browser test is skipped (Debian: apt-get install chromium; .ci/run installs it where apt-get works)`;
if (noBrowser) console.warn(`test/report/report.test.ts: ${noBrowser}`);

const A = '0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c';
const B = '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157';
const TOKEN = '0xd34198f9efc7fd39f0334e76b929f8e3059a6eed';

let dir: string;
let cleanup: () => Promise<void>;
let lake: string;
let runs: RunReport[];

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir('chainlake-report-'));
  lake = path.join(dir, 'lake');
  // A lake of a block-ranged dataset and one fetched whole (time axis), under a daily quota (its ledger), then
  // a run whose one window fails (every request answered 500): a failed window no later run covered.
  const first = await runJob(
    parseJob(
      {
        name: 'good',
        network: 'mainnet',
        target: 'simulator',
        simulator: { seed: 1, scale: 'small' },
        range: { fromBlock: 0, toBlock: 'head' },
        dailyRequestQuota: 100_000,
        datasets: { transactions: { addresses: [A] }, token_supply: { tokens: [TOKEN] } },
      },
      'good',
      process.env,
      { lake },
    ),
  );
  const failing = await startSimulator({ seed: 1, scale: 'small', faults: { rate: 1, kinds: ['500'] } });
  try {
    const second = await runJob(
      parseJob(
        {
          name: 'fails',
          network: 'mainnet',
          target: 'simulator',
          range: { fromBlock: 0, toBlock: first.head, head: first.head },
          retry: { maxAttempts: 1 },
          datasets: { transactions: { addresses: [B] } },
        },
        'fails',
        process.env,
        { lake },
      ),
      { simulator: failing },
    );
    runs = [first, second];
  } finally {
    await failing.close();
  }
}, 180_000);

afterAll(async () => cleanup?.());

describe('chainlake report (a local lake)', () => {
  it("the page's data is the catalog's: windows row for row, runs, requests against the quota, rows per day, snapshots", async () => {
    expect(runs.map((r) => r.status)).toEqual(['complete', 'failed']);
    const d = reportData(await lakeReport({ lake }));
    expect(d.kind).toBe('local');
    expect(d.headline).toEqual(
      expect.objectContaining({ ok: false, failed_windows: 1, summary: '1 failed window not yet fetched again; the last run is failed' }),
    );
    expect(d.headline.last_run).toEqual(expect.objectContaining({ job: 'fails', status: 'failed' }));

    const windows = await queryCatalog(lake, `SELECT dataset, scope, run_id, status, from_block::INT AS f, to_block::INT AS t FROM windows ORDER BY ALL`);
    const drawn = d.coverage.flatMap((l) =>
      l.windows.map((w) => ({ dataset: l.dataset, scope: l.scope, run_id: w.run_id, status: w.status, from: w.from, to: w.to })),
    );
    expect(drawn.length).toBe(windows.length);
    for (const w of windows) {
      const lane = d.coverage.find((l) => l.dataset === w.dataset && l.scope === w.scope)!;
      expect(lane.axis).toBe(w.f === null ? 'time' : 'block');
      const match = drawn.filter((x) => x.dataset === w.dataset && x.scope === w.scope && x.run_id === w.run_id && x.status === w.status);
      expect(match).toHaveLength(1);
      if (w.f !== null) expect([match[0]!.from, match[0]!.to]).toEqual([w.f, w.t]);
      else expect(Date.parse(String(match[0]!.from))).toBe(Date.parse(runs[0]!.startedAt));
    }
    expect(drawn.filter((w) => w.status === 'failed').map((w) => w.scope)).toEqual([`address=${B}`]);

    expect(d.runs.map((r) => [r.run_id, r.status, r.rows, r.requests, r.duration_ms])).toEqual(
      runs.map((r) => [r.runId, r.status, r.totals.rows, r.totals.requests, r.durationMs]),
    );
    const usage = await queryCatalog(lake, `SELECT day::VARCHAR AS day, sum(requests)::INT AS requests FROM request_usage GROUP BY ALL ORDER BY day`);
    expect(usage.length).toBeGreaterThan(0);
    expect(d.requests).toEqual({ source: 'ledger', quota: 100_000, days: usage });
    const perDay = await queryCatalog(lake, `SELECT block_date::VARCHAR AS day, count(*)::INT AS rows FROM transactions GROUP BY ALL ORDER BY day`);
    expect(d.rows_per_day.filter((r) => r.dataset === 'transactions').map((r) => ({ day: r.day, rows: r.rows }))).toEqual(perDay);
    const rejects = await queryCatalog(lake, `SELECT count(*)::INT AS n FROM _rejects`);
    expect(d.rejects.reduce((n, r) => n + r.rows, 0)).toBe(rejects[0]!.n);
    const [snap] = await queryCatalog(lake, `SELECT count(*)::INT AS n, max(snapshot_id)::INT AS current FROM ducklake_snapshot`);
    expect([d.snapshots.count, d.snapshots.current, d.snapshots.old_bytes]).toEqual([snap!.n, snap!.current, 0]);
  });

  it.skipIf(noBrowser !== undefined)(
    'in a real headless Chromium, from file://: no error, nothing fetched, marks that match the catalog, a screenshot that is not blank',
    async () => {
      const file = path.join(dir, 'report.html');
      await writeFile(file, await lakeReport({ lake }));
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-background-networking'] });
      try {
        const page = await browser.newPage({ viewport: { width: 1050, height: 900 } });
        const problems: string[] = [];
        page.on('console', (m) => {
          if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`);
        });
        page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
        page.on('request', (r) => {
          if (r.url() !== pathToFileURL(file).href) problems.push(`fetched ${r.url()}`);
        });
        await page.goto(pathToFileURL(file).href, { waitUntil: 'load', timeout: 30_000 });

        const marks = await page.$$eval('rect.window[data-from][data-to]', (els) =>
          els.map((e) => {
            const a = (name: string) => e.getAttribute(`data-${name}`) ?? undefined;
            return {
              dataset: a('dataset'),
              scope: a('scope'),
              run_id: a('run'),
              status: a('status'),
              from: a('from'),
              to: a('to'),
              fill: e.getAttribute('fill'),
              w: e.getBoundingClientRect().width,
            };
          }),
        );
        const windows = await queryCatalog(lake, `SELECT dataset, scope, run_id, status, from_block::VARCHAR AS f, to_block::VARCHAR AS t FROM windows`);
        const key = (x: { dataset?: string; scope?: string; run_id?: string; status?: string }) => `${x.dataset}|${x.scope}|${x.run_id}|${x.status}`;
        expect(marks.map(key).sort()).toEqual(windows.map((w) => key(w as never)).sort());
        for (const w of windows.filter((x) => x.f !== null)) {
          const m = marks.find((x) => key(x) === key(w as never))!;
          expect([m.from, m.to]).toEqual([w.f, w.t]);
        }
        for (const m of marks) expect(m.w, `${key(m)} is drawn`).toBeGreaterThan(0);
        expect(marks.find((m) => m.status === 'failed')!.fill).toBe('#d64545');
        expect(marks.find((m) => m.status === 'committed')!.fill).toBe('#2f9e5b');

        const runMarks = await page.$$eval('rect.run', (els) =>
          els.map((e) => ({ run: e.getAttribute('data-run'), status: e.getAttribute('data-status'), rows: Number(e.getAttribute('data-rows')) })),
        );
        const runRows = await queryCatalog(
          lake,
          `SELECT run_id AS run, status, CAST(json_extract(report, '$.totals.rows') AS INT) AS rows FROM runs ORDER BY started_at`,
        );
        expect(runMarks).toEqual(runRows);
        expect(await page.textContent('#summary')).toBe('1 failed window not yet fetched again; the last run is failed');
        const quota = await page.getAttribute('line.quota', 'data-value');
        expect(quota).toBe('100000');

        // The screenshot, decoded by the browser itself: a blank page has one colour.
        const png = await page.screenshot({ fullPage: true });
        // (A string: the test's types have no DOM.)
        const colours = (await page.evaluate(`(async () => {
          const img = new Image();
          img.src = 'data:image/png;base64,${png.toString('base64')}';
          await img.decode();
          const canvas = document.createElement('canvas');
          canvas.width = img.width;
          canvas.height = img.height;
          const ctx = canvas.getContext('2d');
          ctx.drawImage(img, 0, 0);
          const px = ctx.getImageData(0, 0, img.width, img.height).data;
          const seen = new Set();
          for (let i = 0; i < px.length; i += 4) seen.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
          return { colours: seen.size, height: img.height };
        })()`)) as { colours: number; height: number };
        expect(colours.height).toBeGreaterThan(900);
        expect(colours.colours).toBeGreaterThan(20);
        expect(problems).toEqual([]);
      } finally {
        await browser.close();
      }
    },
    60_000,
  );

  it('the CLI writes chainlake-report.html or --output, refuses to overwrite without --force, and writes to stdout with -o -', async () => {
    const cwd = path.join(dir, 'cwd');
    await import('node:fs/promises').then((fs) => fs.mkdir(cwd));
    const first = await runCli(['report', '--lake', lake], { cwd });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toContain(`wrote chainlake-report.html: the report of the local lake ${lake} (--lake)`);
    const html = await readFile(path.join(cwd, 'chainlake-report.html'), 'utf8');
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(reportData(html).runs).toHaveLength(2);
    const again = await runCli(['report', '--lake', lake], { cwd });
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('--output chainlake-report.html exists: not overwritten');
    expect(again.stderr).toContain('--force');
    expect((await runCli(['report', '--lake', lake, '--force'], { cwd })).code).toBe(0);
    const out = await runCli(['report', '--lake', lake, '-o', '-'], { cwd, env: { CHAINLAKE_LAKE: path.join(dir, 'nowhere') } });
    expect(out.code, out.stderr).toBe(0);
    expect(reportData(out.stdout).lake).toBe(lake);
  });

  it('chainlake schedule --metrics-port serves the same page at /report', async () => {
    const job = path.join(dir, 'scheduled.json');
    // A schedule that does not fire while the test runs: the page shows the lake as the earlier runs left it.
    const next = new Date(Date.now() + 12 * 3600_000);
    await writeFile(
      job,
      JSON.stringify({
        name: 'scheduled',
        target: 'simulator',
        lake,
        schedule: `0 ${next.getUTCHours()} * * *`,
        datasets: { transactions: { addresses: [A] } },
      }),
    );
    const child = spawn(process.execPath, [CLI, 'schedule', job, '--log-format', 'json', '--metrics-port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no metrics server within 30 s:\n${stderr}`)), 30_000);
        onJsonLines(child.stderr, (ev) => {
          if (ev.event === 'schedule.metrics') {
            clearTimeout(timer);
            resolve(String(ev.url));
          }
        });
      });
      const res = await fetch(`${url}/report`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
      const served = reportData(await res.text());
      const local = reportData(await lakeReport({ lake }));
      expect({ ...served, generated_at: '' }).toEqual({ ...local, generated_at: '' });
      const other = await fetch(`${url}/report?job=other`);
      expect(other.status).toBe(404);
      expect(await other.text()).toBe('/report failed: no job named other is scheduled here (jobs: scheduled)\n');
    } finally {
      await new Promise<number | null>((resolve) => {
        child.on('close', resolve);
        child.kill('SIGTERM');
      });
    }
  }, 60_000);
});
