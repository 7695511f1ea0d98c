import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimatePlan } from '../../src/pipeline/estimate.js';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { runWorker } from '../../src/distributed/worker.js';
import type { AttemptEvent } from '../../src/extract/transport.js';
import { parseJob, type Job } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { streamJobBatches } from '../../src/pipeline/stream.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { tempDir } from '../helpers/lake.js';

let pg: TestPostgres;
let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeAll(async () => {
  pg = await startPostgres();
  tmp = await tempDir('chainlake-source-');
}, 120_000);

afterAll(async () => {
  await pg?.stop();
  await tmp?.cleanup();
});

/** A small job against the embedded simulator, which each caller's source starts (and must stop). */
function jobDoc(name: string) {
  return {
    name,
    target: 'simulator',
    simulator: { seed: 1, scale: 'small' },
    lake: path.join(tmp.dir, name),
    concurrency: 2,
    range: { fromBlock: 0, toBlock: 3_000, windowBlocks: 1_000 },
    // Block-ranged: every caller pins the head (enqueue's one request). The address is jobs/demo.json's (seed 1).
    datasets: { transactions: { addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c'] } },
  };
}

/** Whether anything still listens at `origin` (http://127.0.0.1:port). */
function listening(origin: string): Promise<boolean> {
  const url = new URL(origin);
  return new Promise((resolve) => {
    const socket = net.connect(Number(url.port), url.hostname);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Runs `use` with an attempt observer in the source options, and checks that the caller's requests went through
 * the transport those options configure and that, once it returned, the simulator its source started is gone.
 */
async function expectSharedSource(use: (transport: { onAttempt: (e: AttemptEvent) => void }) => Promise<unknown>): Promise<number> {
  const seen: AttemptEvent[] = [];
  await use({ onAttempt: (e) => seen.push(e) });
  expect(seen.length).toBeGreaterThan(0);
  const origins = [...new Set(seen.map((e) => new URL(e.url).origin))];
  for (const origin of origins) expect({ origin, listening: await listening(origin) }).toEqual({ origin, listening: false });
  return seen.length;
}

describe('one source setup', { timeout: 180_000 }, () => {
  it('run, plan, stream, enqueue and worker send through the transport the source options make, and close what they started', async () => {
    const job = (name: string): Job => parseJob(jobDoc(name), 'inline', {});

    await expectSharedSource((transport) => runJob(job('run'), { transport }));
    await expectSharedSource((transport) => estimatePlan(job('plan'), { probe: true, transport }));
    await expectSharedSource(async (transport) => {
      for await (const batch of streamJobBatches(job('stream'), { transport })) expect(batch.numRows).toBeGreaterThan(0);
    });

    const db = await pg.database();
    const store = path.join(tmp.dir, 'store');
    const doc = jobDoc('distributed');
    await expectSharedSource(async (transport) => {
      // The head pin is the request enqueue sends, through its source.
      const queued = await enqueueJob(parseJob(doc, 'inline', {}), doc, { catalog: db.url, store, transport });
      expect(queued.queued).toBeGreaterThan(0);
    });
    await expectSharedSource(async (transport) => {
      const report = await runWorker({ catalog: db.url, store, id: 'w1', untilIdle: true, pollMs: 50, leaseSeconds: 30, transport });
      expect(report.windowsFetched).toBeGreaterThan(0);
      expect(report.windowsFailed).toBe(0);
    });
  });
});
