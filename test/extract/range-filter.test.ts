// A listing that ignores its block range filter (the real dialect's option, Blockscout #9321): a run must not
// store its rows under windows they do not belong to. The pager refuses the window with a message naming it.
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { tempDir } from '../helpers/lake.js';

let sim: RunningSimulator;
let tmp: Awaited<ReturnType<typeof tempDir>>;
beforeAll(async () => {
  sim = await startSimulator({ seed: 1, scale: 'small', dialect: 'real', ignoresRangeFilter: true });
  tmp = await tempDir('chainlake-range-filter-');
});
afterAll(async () => {
  await sim?.close();
  await tmp?.cleanup();
});

it('the option belongs to the real dialect', async () => {
  await expect(startSimulator({ ignoresRangeFilter: true })).rejects.toThrow(/real dialect/);
});

it('rows outside the block range asked are refused, not stored: the window fails naming the block and the range', async () => {
  const job = parseJob(
    {
      name: 'range-filter',
      target: 'simulator',
      lake: path.join(tmp.dir, 'lake'),
      range: { fromBlock: 0, toBlock: 'head', windowBlocks: 6000 },
      datasets: { transactions: { addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c'] } },
    },
    'range-filter-test',
    process.env,
  );
  const report = await runJob(job, { simulator: sim });
  expect(report.status).toBe('failed');
  expect(report.errors.length).toBeGreaterThan(0);
  expect(report.errors[0]!.error).toMatch(/listed a row of block \d+ when asked for blocks 0-5999 .*ignores the block range filter.*refused, not stored/);
  expect(report.errors[0]!.code).toBe('CHAINLAKE_WINDOW');
  expect(report.totals.rows).toBe(0);
}, 120_000);
