import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { describePrint, fingerprint } from './fingerprint.js';
import { SOAK, simTarget } from './helpers.js';

/**
 * A chain that keeps growing: a run while the head advances (a block every few milliseconds), the head moves
 * on, then an incremental run; the lake equals one full run over the final range. Chain datasets only:
 * snapshots are the state at their run's time by definition.
 */
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  sim = await startSimulator({ seed: 1, scale: 'small', blockTimeMs: SOAK ? 2 : 10 });
  ({ dir, cleanup } = await tempDir('chainlake-moving-'));
});
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

// mined_blocks is fetched too (its listing has no block filter in the API, so new blocks shift its offsets
// while the head moves: the pager's drift refetch), but it is not compared: it is documented as the whole
// listing as of its run, so the later full run sees blocks mined after the incremental run's head.
const CHAIN = ['transactions', 'internal_transactions', 'erc20_transfers', 'erc721_transfers', 'event_logs'];

/**
 * Where every run starts: in CI the chain's last blocks only (what is proven happens at the moving head; the
 * blocks before it are fetched three times over for nothing), the whole chain in the soak.
 */
const FROM_BLOCK = SOAK ? 0 : 24_000;

function job(lake: string, range: Record<string, unknown>) {
  const ex = sim.examples;
  return parseJob(
    {
      name: 'moving',
      target: 'simulator',
      lake,
      range,
      commit: { everyRows: 3000 },
      datasets: {
        transactions: { addresses: ex.addresses },
        internal_transactions: { addresses: ex.addresses.slice(0, 2) },
        erc20_transfers: { addresses: ex.addresses },
        erc721_transfers: { addresses: ex.addresses.slice(1, 3) },
        event_logs: { contracts: [ex.erc20Token], topics: [ex.transferTopic] },
        mined_blocks: { addresses: [ex.miner] },
      },
    },
    'moving-test',
    process.env,
  );
}

describe('a moving chain', () => {
  it('a run while the head advances, then an incremental run, equals one full run over the final range', async () => {
    const lake = path.join(dir, 'incremental');
    const margin = 12;
    const first = await runJob(job(lake, { incremental: true, fromBlock: FROM_BLOCK, safetyMarginBlocks: margin }), { simulator: simTarget(sim) });
    expect(first.status).toBe('complete');
    const head1 = first.head!;
    // The head moved while the run paged (it pinned its own at the start).
    expect(sim.head()).toBeGreaterThan(head1);

    sim.advanceHead(600);
    const second = await runJob(job(lake, { incremental: true, fromBlock: FROM_BLOCK, safetyMarginBlocks: margin }), { simulator: simTarget(sim) });
    expect(second.status).toBe('complete');
    const head2 = second.head!;
    expect(head2).toBeGreaterThan(head1 + 600);
    expect(second.totals.rows).toBeGreaterThan(0);
    // mined_blocks has no block filter in the API: it is one listing per run; every other window continues
    // from its scope's watermark minus the margin, up to the new pinned head.
    const ranges = await queryCatalog(lake, `SELECT DISTINCT from_block, to_block FROM windows WHERE run_id = '${second.runId}' AND from_block IS NOT NULL`);
    expect(ranges).toEqual([{ from_block: BigInt(head1 - margin + 1), to_block: BigInt(head2) }]);

    const full = path.join(dir, 'full');
    const once = await runJob(job(full, { fromBlock: FROM_BLOCK, toBlock: head2 }), { simulator: simTarget(sim) });
    expect(once.status).toBe('complete');
    const a = await fingerprint(lake, { only: CHAIN });
    const b = await fingerprint(full, { only: CHAIN });
    expect(Object.keys(b).sort()).toEqual([...CHAIN].sort());
    expect(a).toEqual(b);
    const mined = (await fingerprint(lake, { only: ['mined_blocks'] })).mined_blocks!;
    expect(mined.keys).toBe(mined.rows);
    const [top] = await queryCatalog(lake, 'SELECT max(block_number)::BIGINT AS b FROM transactions');
    expect(Number(top!.b)).toBeGreaterThan(head1);
    console.log(
      `reliability/moving-chain: first run pinned ${head1} (head ${sim.head()} by the end of the test), incremental run to ${head2} ` +
        `(${second.totals.rows} rows, ${second.totals.requests} requests); equals one full run over 0-${head2} (${describePrint(b)})`,
    );
  });
});
