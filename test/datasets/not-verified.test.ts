import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import { formatReport } from '../../src/pipeline/report.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

// Issue 37: an unverified contract's ABI and code answers ("not verified", HTTP 404 on the simulator) are
// expected answers, recorded as rows with verified = false: the report counts them as not verified, never
// as failed requests or windows.
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  sim = await startSimulator({ seed: 5 });
  ({ dir, cleanup } = await tempDir());
});
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

describe('an unverified contract', () => {
  it('is counted as not verified, not as failed requests, retries or windows', async () => {
    const ex = sim.examples;
    const job = parseJob(
      { name: 'not-verified', target: 'simulator', lake: dir, datasets: { contracts: { contracts: [ex.verifiedContract, ex.unverifiedContract] } } },
      'not-verified',
      process.env,
    );
    const r = await runJob(job, { simulator: sim });
    expect(r.status).toBe('complete');
    expect(r.errors).toEqual([]);
    // The ABI and the code record of the unverified contract: two answers that said "not verified".
    expect(r.notVerified).toBe(2);
    expect(r.failures).toEqual({});
    expect(r.totals.windowsFailed).toBe(0);
    expect(r.totals.retries).toBe(0);
    const text = formatReport(r);
    expect(text).toContain('note: 2 answers said a contract is not verified: recorded as rows with verified = false, not as failures');
    expect(text).not.toMatch(/^failed: /m);
    const rows = await queryCatalog(dir, 'SELECT verified, count(*)::INTEGER AS n FROM contracts GROUP BY 1 ORDER BY 1');
    expect(rows).toEqual([
      { verified: false, n: 2 },
      { verified: true, n: 2 },
    ]);
    const windows = await queryCatalog(dir, "SELECT count(*)::INTEGER AS n FROM windows WHERE status <> 'committed'");
    expect(windows).toEqual([{ n: 0 }]);
  });
});
