import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunReport } from '../../src/pipeline/report.js';
import { runCli } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

// Issue 23.11: the report's `rows` counts what was fetched; `landed` counts the run's rows in the lake after
// its commits. The demo job lists some transactions for two of its addresses and some NFTs twice, so the two
// differ, and `landed` must equal what the lake holds of the run, dataset by dataset. The run commits in
// batches of 3,000 rows, so some partitions are written by several of its commits (each version a file of its
// own name): the report counts each partition's last version once.
let dir: string;
let cleanup: () => Promise<void>;
let report: RunReport;
let lake: string;

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir());
  lake = path.join(dir, 'lake');
  const job = JSON.parse(await readFile('jobs/demo.json', 'utf8')) as Record<string, unknown>;
  const jobFile = path.join(dir, 'demo-batches.json');
  await writeFile(jobFile, JSON.stringify({ ...job, $schema: undefined, commit: { everyRows: 3000 } }));
  // `--report -`: the JSON report is all that stdout carries.
  const r = await runCli(['run', jobFile, '--lake', lake, '-q', '--report', '-'], { timeoutMs: 120_000 });
  expect(r.code, r.stderr).toBe(0);
  report = JSON.parse(r.stdout) as RunReport;
}, 180_000);
afterAll(async () => {
  await cleanup?.();
});

describe('the report counts fetched and landed rows', () => {
  it('landed equals the rows of the run in the lake, for every dataset', async () => {
    for (const d of report.datasets) {
      const [row] = await queryCatalog(lake, `SELECT count(*)::INTEGER AS n FROM ${d.dataset} WHERE _run_id = '${report.runId}'`);
      expect({ dataset: d.dataset, landed: d.landed }).toEqual({ dataset: d.dataset, landed: row!.n });
      expect(d.rows).toBeGreaterThanOrEqual(d.landed);
    }
    expect(report.totals.landed).toBe(report.datasets.reduce((s, d) => s + d.landed, 0));
  });

  it('files and bytes are the current files of each dataset, though batch commits rewrote partitions', async () => {
    const [commits] = await queryCatalog(lake, `SELECT count(*)::INTEGER AS n FROM commits WHERE run_id = '${report.runId}'`);
    expect(commits!.n).toBeGreaterThan(2);
    const rows = await queryCatalog(lake, `SELECT dataset, count(*)::INTEGER AS files, sum(bytes)::BIGINT AS bytes FROM files GROUP BY dataset`);
    const inLake = new Map(rows.map((r) => [r.dataset as string, { files: r.files as number, bytes: Number(r.bytes) }]));
    for (const d of report.datasets) {
      expect({ dataset: d.dataset, files: d.files, bytes: d.bytes }).toEqual({ dataset: d.dataset, ...(inLake.get(d.dataset) ?? { files: 0, bytes: 0 }) });
    }
  });

  it('a row listed for two scoped addresses is fetched twice and lands once', async () => {
    const tx = report.datasets.find((d) => d.dataset === 'transactions')!;
    expect(tx.rows).toBeGreaterThan(tx.landed);
    const [row] = await queryCatalog(lake, `SELECT count(*)::INTEGER AS n, count(DISTINCT transaction_hash)::INTEGER AS distinct_hashes FROM transactions`);
    expect(row!.n).toBe(tx.landed);
    expect(row!.distinct_hashes).toBe(tx.landed);
  });

  it('the printed table names both columns', async () => {
    const { formatReport } = await import('../../src/pipeline/report.js');
    const header = formatReport(report).split('\n')[1]!;
    expect(header).toMatch(/fetched\s+landed/);
    // The demo job fetches some rows twice: the table says why landed is lower.
    const fewer = report.totals.rows - report.totals.landed;
    expect(fewer).toBeGreaterThan(0);
    expect(formatReport(report)).toContain(`note: landed counts rows after de-duplication by natural key: ${fewer} fetched rows`);
  });
});
