// A distributed run asks each block time once (issue 34, the distributed bench's requests): the workers of a run
// share the block times they asked through the control plane's `block_times` (src/load/ledger/block-times.ts).
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlLedger, setupControlPlane } from '../../src/distributed/control-plane.js';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { controlPlanLedger } from '../../src/distributed/plan-ledger.js';
import { runWorker } from '../../src/distributed/worker.js';
import { ledgerBlockTimes } from '../../src/load/ledger/block-times.js';
import { Accounting } from '../../src/extract/accounting.js';
import { ExplorerClient } from '../../src/extract/explorer.js';
import { HttpTransport } from '../../src/extract/transport.js';
import { blockTimes } from '../../src/pipeline/block-times.js';
import { estimatePlan } from '../../src/pipeline/estimate.js';
import { parseJob } from '../../src/pipeline/job.js';
import type { Logger } from '../../src/pipeline/log.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { tempDir } from '../helpers/lake.js';

let pg: TestPostgres;
let sim: RunningSimulator;
let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeAll(async () => {
  pg = await startPostgres();
  sim = await startSimulator({ seed: 1, scale: 'small' });
  tmp = await tempDir('chainlake-block-times-');
}, 120_000);

afterAll(async () => {
  await sim?.close();
  await pg?.stop();
  await tmp?.cleanup();
});

/** The workers' environment: the key the stored job leaves out, and the control plane's password. */
const env = () => ({ CHAINLAKE_API_KEY: sim.apiKey, PGPASSWORD: pg.password });

/** Block-endpoint requests the simulator served since its stats were reset (the head's included: workers ask none). */
const blockRequests = (): number =>
  Object.entries(sim.stats().byRoute)
    .filter(([route]) => route.endsWith('/blocks'))
    .reduce((a, [, n]) => a + n, 0);

describe('block times in a distributed run', { timeout: 300_000 }, () => {
  it('windows of one range fetched by two workers ask each block once; the quota ledger counts exactly the requests sent', async () => {
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store');
    const contracts = [...new Set([sim.examples.verifiedContract, sim.examples.unverifiedContract, sim.examples.erc20Token, sim.examples.erc721Token])];
    expect(contracts.length).toBeGreaterThanOrEqual(3);
    const doc = {
      name: 'dist-block-times',
      target: 'api',
      endpoints: { mainnet: sim.urls.mainnet },
      lake: path.join(tmp.dir, 'unused-local'),
      concurrency: 2,
      dailyRequestQuota: 100_000,
      range: { fromBlock: 0, incremental: true, windowBlocks: 4_000, finalityDepth: 500 },
      // Several scopes: each range has a window per contract, and the windows of one range go to different workers.
      datasets: { event_logs: { contracts, topics: [sim.examples.transferTopic] } },
    };
    const file = path.join(tmp.dir, 'job.json');
    await writeFile(file, JSON.stringify(doc));
    const job = () => parseJob(doc, file, env());
    const opts = { catalog: db.url, store };

    // History: a first run, committed, its top windows provisional.
    await enqueueJob(job(), doc, opts);
    expect((await runWorker({ ...opts, id: 'w0', untilIdle: true, pollMs: 50, env: env() })).windowsFailed).toBe(0);

    // The second run fetches the provisional windows and the safety margin again: each replaces by its blocks' times.
    const client = await db.connect();
    const plan = await estimatePlan(job(), { probe: false, ledger: controlPlanLedger(client, db.url) });
    expect(plan.windows.length).toBeGreaterThan(contracts.length);
    const second = await enqueueJob(job(), doc, opts);
    const planned = (await client.query(`SELECT from_block, to_block FROM chainlake.windows WHERE run_id = $1`, [second.runId])).rows;
    const blocks = new Set(planned.flatMap((r) => [Number(r.from_block), Number(r.to_block)]));
    expect(plan.blockTimeRequests).toBe(blocks.size);
    const usage = async () => Number((await client.query(`SELECT COALESCE(sum(requests), 0)::BIGINT AS n FROM chainlake.request_usage`)).rows[0].n);
    const usedBefore = await usage();
    sim.resetStats();

    // Worker a fetches one window at a time and stops after its first; worker b fetches the rest, among them the
    // other scopes' windows of a's range, which asked those blocks again in b's process.
    const stop = new AbortController();
    const stopAfterOne: Logger = { log: (_level, event) => (event === 'window.fetched' ? stop.abort() : undefined) };
    const a = await runWorker({ ...opts, id: 'a', windowsAtOnce: 1, untilIdle: true, pollMs: 50, signal: stop.signal, log: stopAfterOne, env: env() });
    expect(a.windowsFetched).toBeGreaterThanOrEqual(1);
    const b = await runWorker({ ...opts, id: 'b', untilIdle: true, pollMs: 50, env: env() });
    expect(a.windowsFailed + b.windowsFailed).toBe(0);

    const windows = (await client.query(`SELECT worker, from_block, to_block, requests, status FROM chainlake.windows WHERE run_id = $1`, [second.runId])).rows;
    expect(windows.every((w) => w.status === 'committed' || w.status === 'provisional')).toBe(true);
    // The precondition: a range whose windows both workers fetched.
    const workersOf = new Map<string, Set<string>>();
    for (const w of windows) {
      const range = `${w.from_block}-${w.to_block}`;
      workersOf.set(range, (workersOf.get(range) ?? new Set()).add(String(w.worker)));
    }
    expect([...workersOf.values()].some((ws) => ws.size === 2)).toBe(true);

    // Each block asked once by the run, whichever worker fetched its windows: as the plan estimated.
    expect(blockRequests()).toBe(blocks.size);
    const asked = (
      await client.query(`SELECT path, count(*)::INT AS n FROM chainlake.requests WHERE run_id = $1 AND endpoint = 'block' GROUP BY path`, [second.runId])
    ).rows;
    expect(asked.length).toBe(blocks.size);
    expect(asked.every((r) => r.n === 1)).toBe(true);
    // A window whose times came from the ledger sent no request for them: the windows' requests are those the API saw,
    // and the quota ledger counts exactly those.
    const sent = sim.stats().requests;
    expect(windows.reduce((n, w) => n + Number(w.requests), 0)).toBe(sent);
    expect(a.requests + b.requests).toBe(sent);
    expect((await usage()) - usedBefore).toBe(sent);

    // Both runs are closed, and a closed run's block times went with the transaction that closed it: none is left.
    const runs = (await client.query(`SELECT run_id, status FROM chainlake.runs ORDER BY run_id`)).rows;
    expect(runs.length).toBe(2);
    expect(runs.every((r) => r.status === 'complete')).toBe(true);
    expect(Number((await client.query(`SELECT count(*)::BIGINT AS n FROM chainlake.block_times`)).rows[0].n)).toBe(0);
    await client.end();
  });

  it("keeps the first time recorded for a block, and a run's times to that run", async () => {
    const db = await pg.database();
    const client = await db.connect();
    await setupControlPlane(client, `${path.join(tmp.dir, 'book-store')}/lake/`);
    const run1 = ledgerBlockTimes(controlLedger(client).db, 'run-1', 'chainlake');
    const run2 = ledgerBlockTimes(controlLedger(client).db, 'run-2', 'chainlake');
    expect(await run1.find(7)).toBeUndefined();
    expect(await run1.record(7, '2026-01-01T00:00:00.000Z')).toBe('2026-01-01T00:00:00.000Z');
    // A second asker of the same block (a race between workers) gets the time recorded first.
    expect(await run1.record(7, '2026-01-01T00:00:12.000Z')).toBe('2026-01-01T00:00:00.000Z');
    expect(await run1.find(7)).toBe('2026-01-01T00:00:00.000Z');
    // Another run asks again: a provisional block's time may have changed with a reorg.
    expect(await run2.find(7)).toBeUndefined();
    // A run's times gone as they are recorded (the run closed by another worker meanwhile, its rows deleted, here by
    // a trigger): a control plane problem with its code, not a time made up.
    await client.query(`CREATE FUNCTION chainlake.forget_time() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN DELETE FROM chainlake.block_times WHERE run_id = NEW.run_id; RETURN NULL; END $$`);
    await client.query(`CREATE TRIGGER forget AFTER INSERT ON chainlake.block_times FOR EACH ROW EXECUTE FUNCTION chainlake.forget_time()`);
    await expect(run2.record(8, '2026-01-01T00:00:24.000Z')).rejects.toMatchObject({
      code: 'CHAINLAKE_CONTROL_PLANE',
      message: expect.stringContaining('block 8: its time was recorded in chainlake.block_times for run run-2'),
    });
    await client.end();
  });
  it("two askers of one block at once (two workers' windows of one range): one asks, the other waits for its time; a claim its asker gave up is asked again", async () => {
    const db = await pg.database();
    const client = await db.connect();
    await setupControlPlane(client, `${path.join(tmp.dir, 'race-store')}/lake/`);
    const transport = new HttpTransport({ concurrency: 4 });
    // Two workers: each its own client (no shared in-process memory of asked blocks), one book of the run.
    const worker = () => ({ caller: new ExplorerClient(transport, { baseUrl: sim.urls.mainnet, apiKey: sim.apiKey }), acct: new Accounting() });
    const [a, b] = [worker(), worker()];
    const book = ledgerBlockTimes(controlLedger(client).db, 'run-race', 'chainlake', { pollMs: 5, maxMs: 60_000 });
    sim.resetStats();
    const [ta, tb] = await Promise.all([
      blockTimes(a.caller, a.acct, { from: 100, to: 200 }, undefined, book),
      blockTimes(b.caller, b.acct, { from: 100, to: 200 }, undefined, book),
    ]);
    expect(ta).toEqual(tb);
    // Each block once: before the claim both asked both (4 requests).
    expect(blockRequests()).toBe(2);
    expect(a.acct.calls.length + b.acct.calls.length).toBe(2);

    // An asker that claimed block 300 and stopped before recording it (a killed worker): the next asker waits the
    // claim's bound, then asks, and its time is the run's.
    await client.query(`INSERT INTO chainlake.block_times (run_id, block, block_time) VALUES ('run-race', 300, '')`);
    expect(await book.find(300)).toBeUndefined();
    const patient = ledgerBlockTimes(controlLedger(client).db, 'run-race', 'chainlake', { pollMs: 5, maxMs: 100 });
    sim.resetStats();
    const c = worker();
    const t300 = await blockTimes(c.caller, c.acct, { from: 300, to: 300 }, undefined, patient);
    expect(blockRequests()).toBe(1);
    expect(await book.find(300)).toBe(t300.from);
    // A failed ask gives its claim back: the next asker asks at once instead of waiting.
    const quick = new HttpTransport({ concurrency: 1, retry: { maxAttempts: 1 } });
    await expect(
      blockTimes(new ExplorerClient(quick, { baseUrl: 'http://127.0.0.1:9/', apiKey: sim.apiKey }), new Accounting(), { from: 400, to: 400 }, undefined, book),
    ).rejects.toThrow();
    expect((await client.query(`SELECT count(*)::INT AS n FROM chainlake.block_times WHERE run_id = 'run-race' AND block = 400`)).rows[0].n).toBe(0);
    await transport.close();
    await quick.close();
    await client.end();
  });
});
