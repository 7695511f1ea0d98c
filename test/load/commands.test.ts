import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { runCliCapturing } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';
import { lakeContent, listLake, writeJob } from './helpers.js';

/**
 * chainlake query, status, compact and catalog as a user runs them: the CLI's parser and commands, in this process
 * (what they print and the exit code they decide; the bin's own exit codes are test/cli's). A process each would
 * only add Node's and DuckDB's start.
 */
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let lake: string;
let addresses: string[];

beforeAll(async () => {
  sim = await startSimulator({ seed: 9 });
  ({ dir, cleanup } = await tempDir('chainlake-commands-'));
  lake = path.join(dir, 'lake');
  addresses = sim.examples.addresses.slice(0, 2);
  // Two runs with a hole between their ranges: blocks 10001-19999 were never fetched.
  for (const [name, range] of [
    ['low', { fromBlock: 0, toBlock: 10_000 }],
    ['high', { fromBlock: 20_000, toBlock: 'head' }],
  ] as const) {
    const job = await writeJob(path.join(dir, `${name}.json`), sim, lake, addresses, { range });
    const r = await runJob(parseJob(JSON.parse(await readFile(job, 'utf8')), job, { CHAINLAKE_API_KEY: sim.apiKey }));
    expect(r.status).toBe('complete');
  }
}, 120_000);

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

describe('chainlake query', () => {
  const sql = 'SELECT count(*) AS n, min(block_number) AS lo FROM transactions';
  it('prints a table, CSV or JSON lines', async () => {
    const json = await runCliCapturing(['query', '--lake', lake, '--format', 'json', sql]);
    expect(json.code, json.stderr).toBe(0);
    const row = JSON.parse(json.stdout) as { n: string | number; lo: string | number };
    expect(Number(row.n)).toBe((await lakeContent(lake)).transactions!.rows);
    const csv = await runCliCapturing(['query', '--lake', lake, '--format', 'csv', sql]);
    expect(csv.stdout.trim().split('\n')).toEqual(['n,lo', `${row.n},${row.lo}`]);
    const table = await runCliCapturing(['query', '--lake', lake, sql]);
    expect(table.stdout).toMatch(/^ *n \| *lo\n-+-\+-+\n *\d+ \| *\d+\n\(1 row\)\n$/);
  });

  it('is read-only: a statement that would change the catalog fails with exit 2 and leaves the lake as it was', async () => {
    const before = await lakeContent(lake);
    for (const stmt of ['CREATE TABLE x AS SELECT 1', 'DROP VIEW transactions', 'UPDATE watermarks SET block = 0']) {
      const r = await runCliCapturing(['query', '--lake', lake, stmt]);
      expect(r.code, stmt).toBe(2);
      expect(r.stderr).toMatch(/query failed: .*read-only/i);
    }
    expect(await lakeContent(lake)).toEqual(before);
    const still = await runCliCapturing(['query', '--lake', lake, '--format', 'csv', 'SELECT count(*) AS n FROM watermarks WHERE block > 0']);
    expect(still.stdout.trim()).toBe(`n\n${addresses.length}`);
  });

  it('explains a bad statement and a missing lake', async () => {
    const bad = await runCliCapturing(['query', '--lake', lake, 'SELEC 1']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/query failed: Parser Error/);
    const unknown = await runCliCapturing(['query', '--lake', lake, 'SELECT * FROM no_such_dataset']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/no_such_dataset/);
    const missing = await runCliCapturing(['query', '--lake', path.join(dir, 'nowhere'), 'SELECT 1']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no lake at/);
  });
});

describe('chainlake status', () => {
  it('lists datasets, runs, watermarks and the gap between committed windows', async () => {
    const r = await runCliCapturing(['status', '--lake', lake, '--format', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout) as {
      datasets: { dataset: string; rows: number }[];
      runs: { job: string; status: string }[];
      watermarks: { scope: string; block: number }[];
      gaps: { scope: string; from_block: number; to_block: number }[];
      strayPartitions: unknown[];
      pendingCommit: boolean;
    };
    expect(s.datasets.map((d) => d.dataset)).toEqual(['transactions']);
    expect(s.runs.map((x) => `${x.job}:${x.status}`)).toEqual(['high:complete', 'low:complete']);
    expect(s.watermarks).toHaveLength(addresses.length);
    expect(s.gaps).toEqual([...addresses].sort().map((a) => expect.objectContaining({ scope: `address=${a}`, from_block: 10_001, to_block: 19_999 })));
    expect(s.strayPartitions).toEqual([]);
    expect(s.pendingCommit).toBe(false);

    const text = await runCliCapturing(['status', '--lake', lake]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/datasets:\n/);
    expect(text.stdout).toMatch(/last 2 runs:\n/);
    expect(text.stdout).toMatch(/gaps between committed windows:\n[^]*10001 \| +19999/);
  });

  it('on a missing lake says so', async () => {
    const r = await runCliCapturing(['status', '--lake', path.join(dir, 'nowhere')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/no lake at/);
  });
});

describe('chainlake compact and catalog', () => {
  it('compact names the lake and leaves a compact one as it is, without changing a row', async () => {
    const before = await lakeContent(lake);
    const r = await runCliCapturing(['compact', '--lake', lake, '--dataset', 'transactions']);
    expect(r.code, r.stderr).toBe(0);
    // Every commit writes each partition it touches as one file: the partitions a compaction rewrites are another
    // writer's (test/load/shared-lake.test.ts).
    expect(r.stdout).toMatch(/^the local lake .* \(--lake\): nothing to compact; \d+ partitions already compact \(one file each\), left as they are\n$/);
    expect(await lakeContent(lake)).toEqual(before);
    const bad = await runCliCapturing(['compact', '--lake', lake, '--dataset', 'nope']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--dataset nope: not a table of this lake[\s\S]*hint: its tables: .*\btransactions\b.*\b_rejects\b/);
  });

  it('compact of compact partitions writes nothing: no file, no snapshot, the same bytes', async () => {
    const snapshots = async (): Promise<number> => {
      const r = await runCliCapturing(['query', '--lake', lake, '--format', 'csv', 'SELECT count(*) AS n FROM ducklake_snapshot']);
      expect(r.code, r.stderr).toBe(0);
      return Number(r.stdout.trim().split('\n')[1]);
    };
    await runCliCapturing(['compact', '--lake', lake]);
    const files = await listLake(lake);
    const before = await snapshots();
    for (let i = 0; i < 2; i++) {
      const r = await runCliCapturing(['compact', '--lake', lake, '--format', 'json']);
      expect(r.code, r.stderr).toBe(0);
      const report = JSON.parse(r.stdout) as { partitions: number; alreadyCompact: number };
      expect(report.partitions).toBe(0);
      expect(report.alreadyCompact).toBeGreaterThan(0);
    }
    expect(await listLake(lake)).toEqual(files);
    expect(await snapshots()).toBe(before);
  });

  it('every new command has help with examples', async () => {
    for (const cmd of [['status'], ['compact'], ['catalog', 'rebuild'], ['query']]) {
      const r = await runCliCapturing([...cmd, '--help']);
      expect(r.code, cmd.join(' ')).toBe(0);
      expect(r.stdout).toMatch(/Examples:/);
      expect(r.stdout).toMatch(/--lake/);
    }
  });
});
