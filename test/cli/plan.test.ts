import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { runCli } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  // A slow API, as real ones are: the plan must not assume the probes' pace is the run's.
  sim = await startSimulator({ seed: 13, latencyMs: 30 });
  ({ dir, cleanup } = await tempDir());
});
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

interface Plan {
  lake: string;
  estimatedRequests: number;
  estimatedSeconds: number;
  durationBasis: { kind: string; runId?: string; requests?: number; seconds?: number; meanLatencyMs?: number; concurrency?: number };
}

// Hang guard, not a speed expectation: each step runs the CLI in child processes on a shared machine.
describe('plan', { timeout: 300_000 }, () => {
  it('names its lake and estimates the duration from the probes, then from the pace of the last run', async () => {
    const lake = path.join(dir, 'lake');
    const job = path.join(dir, 'job.json');
    await writeFile(
      job,
      JSON.stringify({
        name: 'planned',
        target: 'api',
        endpoints: { mainnet: sim.urls.mainnet },
        lake,
        concurrency: 2,
        range: { fromBlock: 0, toBlock: 30_000, windowBlocks: 5_000 },
        datasets: { transactions: { addresses: sim.examples.addresses.slice(0, 4) } },
      }),
    );
    const env = { CHAINLAKE_API_KEY: sim.apiKey };
    const text = await runCli(['plan', job], { env });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(`plan for planned on mainnet into the lake ${lake}:`);
    expect(text.stdout).toMatch(/duration: [\d.]+ s \(from the probes' mean latency of \d+ ms with 2 requests in flight/);

    const first = JSON.parse((await runCli(['plan', job, '--format', 'json'], { env })).stdout) as Plan;
    expect(first.lake).toBe(lake);
    expect(first.durationBasis.kind).toBe('probe');
    expect(first.estimatedSeconds).toBeCloseTo((first.estimatedRequests * first.durationBasis.meanLatencyMs!) / 1000 / 2, 1);

    const run = await runCli(['run', job, '-q'], { env });
    expect(run.code, run.stderr).toBe(0);
    const [last] = await queryCatalog(
      lake,
      `SELECT run_id, CAST(json_extract(report, '$.totals.requests') AS BIGINT) AS requests, CAST(json_extract(report, '$.durationMs') AS BIGINT) AS ms FROM runs`,
    );
    const after = JSON.parse((await runCli(['plan', job, '--format', 'json'], { env })).stdout) as Plan;
    expect(after.durationBasis).toEqual({ kind: 'last-run', runId: last!.run_id, requests: Number(last!.requests), seconds: Number(last!.ms) / 1000 });
    expect(after.estimatedSeconds).toBeCloseTo((after.estimatedRequests * Number(last!.ms)) / 1000 / Number(last!.requests), 6);
    const again = await runCli(['plan', job], { env });
    expect(again.stdout).toMatch(new RegExp(`at the pace of the last run, ${String(last!.run_id)}: \\d+ requests in [\\d.]+ s`));
  });
});
