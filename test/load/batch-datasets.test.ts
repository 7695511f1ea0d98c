import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import type { Logger } from '../../src/pipeline/log.js';
import type { RunReport } from '../../src/pipeline/report.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { datasetDigest, queryCatalog, tempDir } from '../helpers/lake.js';

// Issue 34 ("Speed"): a run's windows span a scope's whole block range (joined windows), so two batches of one
// dataset touch the same day partitions and the second re-reads and rewrites every row the first wrote. A due
// batch holds back the windows of a dataset that still has windows to come (within the commit policy's bounds),
// so here each partition file is written once: the commits' files add up to the files the lake holds.
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  sim = await startSimulator({ seed: 1 });
  ({ dir, cleanup } = await tempDir());
});
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

interface Commit {
  windows: number;
  rows: number;
  files: number;
}

async function run(name: string, everyRows: number): Promise<{ report: RunReport; commits: Commit[]; lake: string }> {
  const lake = path.join(dir, name);
  const addresses = sim.examples.addresses;
  const job = parseJob(
    {
      name,
      target: 'simulator',
      lake,
      // One window at a time, in the job's order: every transactions window, then the erc20_transfers ones.
      concurrency: 1,
      commit: { everyRows, everySeconds: 3600 },
      range: { fromBlock: 0 },
      datasets: { transactions: { addresses: addresses.slice(0, 3) }, erc20_transfers: { addresses: addresses.slice(0, 3) } },
    },
    'inline',
    {},
  );
  const commits: Commit[] = [];
  const logger: Logger = { log: (_level, event, _message, fields) => (event === 'commit' ? commits.push(fields as unknown as Commit) : undefined) };
  const report = await runJob(job, { simulator: sim, logger });
  expect(report.errors).toEqual([]);
  return { report, commits, lake };
}

describe('batch commits of joined windows', () => {
  it('a dataset with windows still to come waits for them: each partition file is written once', async () => {
    // The rows of each dataset, from a run that commits once.
    const once = await run('once', 10_000_000);
    expect(once.commits).toHaveLength(1);
    const rows = new Map(once.report.datasets.map((d) => [d.dataset, d.rows]));
    const tx = rows.get('transactions')!;
    const transfers = rows.get('erc20_transfers')!;
    // A batch is due at the first transfers window with rows: transactions is complete then, the transfers are not.
    expect(transfers).toBeGreaterThan(0);
    expect(transfers).toBeLessThan(tx);
    const batched = await run('batched', tx + 1);
    expect(batched.commits.length).toBeGreaterThan(1);
    const [inLake] = await queryCatalog(batched.lake, 'SELECT count(*)::INTEGER AS n FROM files');
    expect(batched.commits.reduce((a, c) => a + c.files, 0)).toBe(inLake!.n);
    // The same rows as the run that committed once.
    for (const dataset of ['transactions', 'erc20_transfers']) {
      expect(await datasetDigest(batched.lake, dataset, 'transaction_hash')).toEqual(await datasetDigest(once.lake, dataset, 'transaction_hash'));
    }
    // A fresh lake's tables are created when the run starts, before any window is fetched, not by the commit that
    // first writes each: a commit made while windows fetch waits for the event loop at every statement.
    const changes = await queryCatalog(
      batched.lake,
      'SELECT snapshot_id::INTEGER AS id, changes_made AS made FROM ducklake_snapshot_changes ORDER BY snapshot_id',
    );
    const firstInsert = changes.find((c) => String(c.made).includes('inserted_into_table'))!.id as number;
    const created = changes.filter((c) => String(c.made).includes('created_table')).map((c) => [String(c.made), (c.id as number) < firstInsert]);
    expect(created).toEqual(['transactions', 'erc20_transfers', '_rejects'].map((t) => [expect.stringContaining(`"${t}"`), true]));
  }, 120_000);
});
