import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { apiAll, apiResults } from './helpers.js';

/** On testnet, internal transactions by hash (#13) are served by the alternate host; everything else by the main one. */
let sim: RunningSimulator;
let lake: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  sim = await startSimulator({ seed: 17 });
  ({ dir: lake, cleanup } = await tempDir());
});

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

describe('testnet', () => {
  it('internal_transactions by hash come from the alternate host, by address from the main one', async () => {
    const ex = sim.testnetExamples;
    const from = sim.head('testnet') - 2000;
    const job = parseJob(
      {
        name: 'testnet',
        network: 'testnet',
        target: 'simulator',
        lake,
        range: { fromBlock: from },
        datasets: { internal_transactions: { addresses: [ex.addresses[0]], transactions: [ex.internalTransactionHash] } },
      },
      'testnet-test',
      process.env,
    );
    const before = sim.stats().byRoute;
    const report = await runJob(job, { simulator: sim });
    expect(report.errors).toEqual([]);
    const after = sim.stats().byRoute;
    const delta = (k: string): number => (after[k] ?? 0) - (before[k] ?? 0);
    expect(delta('testnet-alt/transactions/internal-transactions')).toBe(1);
    expect(delta('testnet/accounts/internal-transactions')).toBeGreaterThan(0);

    const byTx = (await apiResults(sim.urls.testnetAlt, sim.apiKey, `/v1/transactions/${ex.internalTransactionHash}/internal-transactions`, { limit: 1000 }))
      .data as Record<string, unknown>[];
    const byAddress = await apiAll(sim.urls.testnet, sim.apiKey, `/v1/accounts/${ex.addresses[0]}/internal-transactions`, { startBlock: from });
    const keys = new Set(
      [...byTx, ...byAddress].map((e) => `${String(e.transaction_hash).toLowerCase()}/${JSON.stringify((e.trace_address as string[]).map(Number))}`),
    );
    const [n] = await queryCatalog(lake, `SELECT count(*)::BIGINT AS n, min(network) AS net FROM internal_transactions`);
    expect(Number(n!.n)).toBe(keys.size);
    expect(n!.net).toBe('testnet');
  });
});
