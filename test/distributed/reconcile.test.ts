import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { openDistributedLake } from '../../src/distributed/read.js';
import { reconcileDistributedLake } from '../../src/distributed/reconcile.js';
import { parseGenesis } from '../../src/load/read/reconcile.js';
import { runWorker } from '../../src/distributed/worker.js';
import { parseJob } from '../../src/pipeline/job.js';
import { A_BUSY0, A_ERC20_0, A_MINER0 } from '../../src/simulator/chain.js';
import { genesisFile } from '../../src/simulator/genesis.js';
import { chainFor } from '../../src/simulator/index.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

const chain = chainFor(1, 'small', 'mainnet');
// A busy address (transactions, internal transfers, tokens), a miner (rewards) and an address whose history the
// job takes from a later block.
const WHOLE = [chain.addrLower(A_BUSY0 + 1), chain.addrLower(A_MINER0 + 7)];
const LATER = chain.addrLower(A_BUSY0 + 2);
const TOKEN = chain.addrLower(A_ERC20_0);

const jobDoc = (name: string, addresses: string[], fromBlock: number) => ({
  name,
  network: 'mainnet',
  target: 'simulator',
  simulator: { seed: 1, scale: 'small' },
  range: { fromBlock, toBlock: 'head' },
  datasets: {
    transactions: { addresses },
    internal_transactions: { addresses },
    erc20_transfers: { addresses },
    mined_blocks: { addresses },
    balances: { addresses },
    token_balances: { pairs: addresses.map((holder) => ({ token: TOKEN, holder })) },
  },
});

describe('chainlake reconcile --catalog (a distributed lake, real PostgreSQL)', () => {
  let pg: TestPostgres;
  let tmp: Awaited<ReturnType<typeof tempDir>>;
  let db: Awaited<ReturnType<TestPostgres['database']>>;
  let store: string;
  beforeAll(async () => {
    pg = await startPostgres();
    tmp = await tempDir('chainlake-reconcile-dist-');
    db = await pg.database();
    store = path.join(tmp.dir, 'store');
    for (const [name, addresses, from] of [
      ['whole', WHOLE, 0],
      ['later', [LATER], 5_000],
    ] as const) {
      const doc = jobDoc(name, [...addresses], from);
      await enqueueJob(parseJob(doc, name, process.env), doc, { catalog: db.url, store });
      await runWorker({ catalog: db.url, store, id: name, untilIdle: true, pollMs: 50 });
    }
  });
  afterAll(async () => {
    await pg?.stop();
    await tmp?.cleanup();
  });

  it('reconciles by the same statement as a local lake: whole histories exactly, a later start as history not complete', async () => {
    const genesis = path.join(tmp.dir, 'genesis.json');
    await writeFile(genesis, genesisFile(chain));
    const r = await runCli(['reconcile', '--catalog', db.url, '--store', store, '--genesis', genesis, '--format', 'json'], {
      env: { PGPASSWORD: pg.password },
      timeoutMs: 120_000,
    });
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout) as {
      balances: number;
      reconciled: number;
      differs: number;
      rows: { address: string; outcome: string; reason: string | null }[];
    };
    const outcome = (a: string) => doc.rows.filter((x) => x.address === a).map((x) => x.outcome);
    for (const a of WHOLE) expect(outcome(a), a).toEqual(['reconciled', 'reconciled']);
    expect(outcome(LATER)).toEqual(['unchecked', 'unchecked']);
    for (const x of doc.rows.filter((x) => x.address === LATER)) expect(x.reason).toMatch(/^history not complete/);
    expect(doc).toMatchObject({ balances: 6, reconciled: 4, differs: 0 });

    // The table lands in the distributed lake, as on one machine: one row per balance, the outcome printed.
    const table = async () => {
      const lake = await openDistributedLake({ catalog: db.url, store });
      try {
        const rows = (
          await lake.conn.runAndReadAll('SELECT address, asset, outcome, reconciled FROM reconciliation ORDER BY address, asset')
        ).getRowObjectsJS();
        return rows.map((r) => ({ address: String(r.address), asset: String(r.asset), outcome: String(r.outcome), reconciled: r.reconciled }));
      } finally {
        lake.close();
      }
    };
    const written = await table();
    expect(written).toHaveLength(doc.balances);
    for (const a of WHOLE)
      expect(
        written.filter((x) => x.address === a).map((x) => x.outcome),
        a,
      ).toEqual(['reconciled', 'reconciled']);
    expect(written.filter((x) => x.address === LATER).map((x) => x.reconciled)).toEqual([false, false]);
    // Reconciling again replaces the day's rows: still one per (address, asset).
    const again = await reconcileDistributedLake({ catalog: db.url, store, genesis: parseGenesis(genesisFile(chain), 'genesis') });
    expect(again.snapshotId).toBeGreaterThan(0);
    expect(await table()).toEqual(written);
    // Each reconciliation is a run of its own in `runs` (status and report list it), as on one machine.
    const lake = await openDistributedLake({ catalog: db.url, store });
    try {
      const runs = (
        await lake.conn.runAndReadAll(
          `SELECT run_id, status, CAST(report->>'balances' AS INTEGER) AS balances, CAST(report->'totals'->>'rows' AS INTEGER) AS rows,
                  finished_at IS NOT NULL AS finished FROM runs WHERE job = '(reconcile)' ORDER BY started_at`,
        )
      ).getRowObjectsJS();
      expect(runs).toEqual([
        { run_id: expect.stringMatching(/-reconcile-/), status: 'complete', balances: doc.balances, rows: doc.balances, finished: true },
        { run_id: again.runId, status: 'complete', balances: doc.balances, rows: doc.balances, finished: true },
      ]);
    } finally {
      lake.close();
    }
  });
});
