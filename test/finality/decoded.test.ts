// Finality and decoded events: a log the chain reorganised away is deleted by the next run's replacement of its
// window (test/finality/finality.test.ts), and the rows decoded from it go in the same commit, so that the decoded
// datasets equal a clean run's and verify finds every decoded row's log.
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { verifySession } from '../../src/pipeline/verify/session.js';
import { PRESETS } from '../../src/simulator/chain.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

const H0 = PRESETS.small.visibleBlocks;
let tmp: Awaited<ReturnType<typeof tempDir>>;
const sims: RunningSimulator[] = [];
beforeAll(async () => {
  tmp = await tempDir('chainlake-finality-decoded-');
});
afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  await tmp?.cleanup();
});

const start = async (opts: Parameters<typeof startSimulator>[0]) => {
  const sim = await startSimulator({ seed: 36, ...opts });
  sims.push(sim);
  return sim;
};

const logsJob = (sim: RunningSimulator, lake: string) =>
  parseJob(
    {
      name: 'finality-decoded',
      target: 'simulator',
      lake,
      range: { incremental: true, fromBlock: H0 - 100, safetyMarginBlocks: 2, finalityDepth: 6 },
      datasets: { event_logs: { contracts: [{ address: sim.examples.erc20Token, topics: [sim.examples.transferTopic] }] } },
      decode: { standard: ['erc20'] },
    },
    'finality-decoded',
    process.env,
  );

/** A table's rows without what changes from run to run, as sorted text. */
const content = async (lake: string, table: string, columns: string): Promise<string[]> =>
  (await queryCatalog(lake, `SELECT ${columns} FROM ${table} ORDER BY ALL`)).map((r) => JSON.stringify(r, (_k, v) => (typeof v === 'bigint' ? String(v) : v)));

it('a reorganised log: its decoded row goes in the commit that replaces its window; the decoded rows equal a clean run’s and verify holds', async () => {
  const sim = await start({ reorg: { at: H0, depth: 4, reach: 8 } });
  const lake = path.join(tmp.dir, 'reorg');
  expect((await runJob(logsJob(sim, lake), { simulator: sim })).status).toBe('complete');
  const before = await content(lake, 'erc20_transfer_events', 'transaction_hash, log_index');
  sim.advanceHead(3);
  expect((await runJob(logsJob(sim, lake), { simulator: sim })).status).toBe('complete');

  const clean = await start({});
  clean.advanceHead(3);
  const cleanLake = path.join(tmp.dir, 'clean');
  expect((await runJob(logsJob(clean, cleanLake), { simulator: clean })).status).toBe('complete');
  const columns = 'token_address, "timestamp", transaction_hash, log_index, sender, receiver, value';
  const after = await content(lake, 'erc20_transfer_events', columns);
  expect(after).toEqual(await content(cleanLake, 'erc20_transfer_events', columns));
  // The fork's logs were decoded once: some of those rows are gone.
  const kept = new Set(await content(lake, 'erc20_transfer_events', 'transaction_hash, log_index'));
  expect(before.filter((k) => !kept.has(k)).length).toBeGreaterThan(0);
  const s = await verifySession(logsJob(sim, lake), { kind: 'local', lake }, {}, { simulator: sim });
  expect(s.rows.filter((r) => r.status === 'differs')).toEqual([]);
}, 120_000);
