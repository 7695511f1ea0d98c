import { cp, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { A_BUSY0, A_DEPLOYER, A_ERC20_0, A_ERC721_0, A_MINER0, A_NFT_HOLDER, N_ERC20, N_ERC721 } from '../../src/simulator/chain.js';
import { chainFor, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { genesisFile } from '../../src/simulator/genesis.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { LakePaths } from '../../src/load/paths.js';
import { openLakeReader } from '../../src/load/read/reader.js';
import { parseGenesis, reconcileBalances } from '../../src/load/read/reconcile.js';
import { reconcileLocalLake } from '../../src/lake/reconcile.js';
import { runCliCapturing } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { onTestHook } from '../../src/load/test-hooks.js';
import { rebuildCatalog } from '../../src/load/write/maintenance.js';
import { REFERENCE_DIR, withReference } from '../ducklake/helpers.js';

const HAS_REF = existsSync(path.join(REFERENCE_DIR, 'ducklake.duckdb_extension'));

const SEED = 1;
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
const chain = chainFor(SEED, 'small', 'mainnet');
const genesis = parseGenesis(genesisFile(chain), 'the simulator');

// Every kind of account the chain has, except those whose history is too long to export in a test (the whale,
// the pools, the token contracts, the crowded address whose one block holds more than the result window, and the
// first miner, whose mined blocks exceed the result window of a listing with no block filter): busy addresses, the
// NFT holder, the deployer, miners, and ordinary accounts. Three of the six busy addresses and two of the seven
// other miners: more of a kind only added windows (each account is a window of every dataset and of each of its
// twelve token balances).
const ACCOUNTS = [
  ...Array.from({ length: 3 }, (_, i) => A_BUSY0 + 3 + i),
  A_NFT_HOLDER,
  A_DEPLOYER,
  ...Array.from({ length: 2 }, (_, i) => A_MINER0 + 1 + i),
  chain.createdEnd,
  chain.createdEnd + 1,
  chain.createdEnd + 777,
].map((i) => chain.addrLower(i));
const ERC20S = Array.from({ length: N_ERC20 }, (_, i) => chain.addrLower(A_ERC20_0 + i));
const NFTS = Array.from({ length: N_ERC721 }, (_, i) => chain.addrLower(A_ERC721_0 + i));
const TOKENS = [...ERC20S, ...NFTS];

const wholeHistoryJob = (lake: string, accounts: string[], fromBlock = 0, range: Record<string, unknown> = {}) =>
  parseJob(
    {
      name: 'whole-history',
      target: 'simulator',
      lake,
      range: { fromBlock, ...range },
      datasets: {
        transactions: { addresses: accounts },
        internal_transactions: { addresses: accounts },
        erc20_transfers: { addresses: accounts },
        erc721_transfers: { addresses: accounts },
        mined_blocks: { addresses: accounts },
        balances: { addresses: accounts },
        token_balances: { pairs: accounts.flatMap((holder) => TOKENS.map((token) => ({ token, holder }))) },
      },
    },
    'reconcile-test',
    process.env,
  );

let lake: string;
beforeAll(async () => {
  sim = await startSimulator({ seed: SEED });
  ({ dir, cleanup } = await tempDir());
  lake = path.join(dir, 'whole');
  const report = await runJob(wholeHistoryJob(lake, ACCOUNTS), { simulator: sim });
  expect(report.status, JSON.stringify(report.errors)).toBe('complete');
});
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

describe('reconciliation', () => {
  it("the simulator's chain reconciles exactly for every account whose whole history the lake holds", async () => {
    const r = await reconcileLocalLake(new LakePaths(lake), { genesis });
    const notReconciled = r.rowsOut.filter((x) => x.outcome !== 'reconciled').map((x) => `${x.address} ${x.asset}: ${x.reason}`);
    expect(notReconciled).toEqual([]);
    expect(r.rowsOut).toHaveLength(ACCOUNTS.length * (1 + TOKENS.length));
    // Not vacuous: every kind of movement took part (transfers, fees, internal transfers, rewards, tokens).
    const counted = await queryCatalog(
      lake,
      `SELECT (SELECT count(*) FROM internal_transactions WHERE value > 0) AS itx, (SELECT count(*) FROM mined_blocks) AS mined,
              (SELECT count(*) FROM transactions WHERE NOT tx_status) AS failed, (SELECT count(*) FROM erc20_transfers WHERE value IS NULL) AS huge`,
    );
    for (const v of Object.values(counted[0]!)) expect(Number(v)).toBeGreaterThan(0);
    // ERC-721 balances are counts of tokens held, reconciled from the transfers of one endpoint although the lake
    // holds most transfers twice (one row per endpoint listing it).
    const nfts = r.rowsOut.filter((x) => NFTS.includes(x.asset));
    expect(nfts.filter((x) => x.outcome === 'reconciled' && x.reported! > 0n).length).toBeGreaterThan(0);
    const origins = await queryCatalog(lake, 'SELECT count(DISTINCT origin_endpoint) AS n, count(*) AS rows FROM erc721_transfers');
    expect(Number(origins[0]!.n)).toBe(2);

    // The table landed in the lake, queryable as `reconciliation`, one row per balance, every one reconciled.
    const table = await queryCatalog(
      lake,
      `SELECT count(*) AS n, count(*) FILTER (WHERE reconciled AND difference = 0 AND reason IS NULL) AS ok,
              count(*) FILTER (WHERE asset = 'native' AND computed > 0) AS native FROM reconciliation`,
    );
    expect(table[0]).toEqual({ n: BigInt(r.rowsOut.length), ok: BigInt(r.rowsOut.length), native: BigInt(ACCOUNTS.length) });
    // Reconciling again replaces the rows, it does not add to them: chainlake reconcile's test below reconciles twice.
  });

  it('a row removed from the lake shows as a difference, with its reason', async () => {
    const reader = await openLakeReader(new LakePaths(lake));
    try {
      const victim = ACCOUNTS[2]!;
      const gone = (
        await reader.conn.runAndReadAll(
          `SELECT transaction_hash, CAST(value AS VARCHAR) AS value, CAST(tx_fee AS VARCHAR) AS fee FROM transactions
           WHERE sender = '${victim}' AND tx_status AND value > 0 ORDER BY block_number LIMIT 1`,
        )
      ).getRowObjectsJS()[0] as { transaction_hash: string; value: string; fee: string };
      // The lake without that one row, as the rest of the statement reads it.
      const db = String((await reader.conn.runAndReadAll('SELECT current_database()')).getRowsJS()[0]![0]);
      await reader.conn.run(`CREATE TEMP VIEW transactions AS SELECT * FROM "${db}".main.transactions WHERE transaction_hash <> '${gone.transaction_hash}'`);
      const rows = await reconcileBalances(reader.conn, { genesis });
      const differs = rows.filter((x) => x.outcome !== 'reconciled');
      expect(differs.map((x) => [x.address, x.asset, x.outcome])).toEqual([[victim, 'native', 'differs']]);
      expect(differs[0]!.difference).toBe(-(BigInt(gone.value) + BigInt(gone.fee)));
      expect(differs[0]!.reason).toMatch(/^difference of -\d+ over a whole history the lake holds: a row missing from the lake/);
    } finally {
      reader.close();
    }
  });

  it('an account whose history starts after block 0, or has a gap, is "history not complete"; windows committed in chunks and runs make one history', async () => {
    const accounts = [ACCOUNTS[1]!];
    const chunked = path.join(dir, 'chunked');
    // One lake, chunks of 4,000 blocks, the history taken in three runs out of order: [24001, head] (a history that
    // starts after block 0), then [0, 20000] (a gap: 20001-24000 never fetched), then [20001, 24000] (whole).
    const run = async (range: { fromBlock?: number; toBlock?: number }) =>
      expect((await runJob(wholeHistoryJob(chunked, accounts, 0, { windowBlocks: 4_000, ...range }), { simulator: sim })).status).toBe('complete');
    await run({ fromBlock: 24_001 });
    const later = await reconcileLocalLake(new LakePaths(chunked), { genesis });
    expect(later.rowsOut.length).toBe(1 + TOKENS.length);
    for (const row of later.rowsOut) {
      expect(row.outcome).toBe('unchecked');
      expect(row.reason).toMatch(/^history not complete: .*not held from block 0/);
      expect(row.difference).toBeNull();
    }

    await run({ toBlock: 20_000 });
    const r = await reconcileLocalLake(new LakePaths(chunked), { genesis });
    const native = r.rowsOut.find((x) => x.asset === 'native')!;
    expect(native.outcome).toBe('unchecked');
    expect(native.reason).toMatch(
      /^history not complete: transactions held from block 0 to 20000 only, internal_transactions held from block 0 to 20000 only \(the balance is at block \d+\)$/,
    );

    await run({ fromBlock: 20_001, toBlock: 24_000 });
    const windows = await queryCatalog(chunked, `SELECT count(*) AS n FROM windows WHERE dataset = 'transactions'`);
    expect(Number(windows[0]!.n)).toBeGreaterThan(5);
    const whole = await reconcileLocalLake(new LakePaths(chunked), { genesis });
    expect(whole.rowsOut.filter((x) => x.outcome !== 'reconciled').map((x) => x.reason)).toEqual([]);
  });

  it('chainlake reconcile prints the summary and exits 6 when a balance differs, 0 when all reconcile or cannot be judged', async () => {
    // In this process: what the commands print and the exit code they set are the point, not their process.
    // The simulator's genesis file, as a user gets it.
    const right = path.join(dir, 'genesis.json');
    const written = await runCliCapturing(['simulate', '--seed', String(SEED), '--write-genesis', right]);
    expect(written.code, written.stderr).toBe(0);
    expect(written.stdout).toContain(`to ${right}`);
    const ok = await runCliCapturing(['reconcile', '--lake', lake, '--genesis', right, '--format', 'json']);
    expect(ok.code, ok.stderr).toBe(0);
    const doc = JSON.parse(ok.stdout) as { balances: number; reconciled: number; differs: number };
    expect(doc).toMatchObject({ balances: ACCOUNTS.length * (1 + TOKENS.length), reconciled: ACCOUNTS.length * (1 + TOKENS.length), differs: 0 });

    // One allocation 1 wei off: that account's native balance differs, and the command says which.
    const wrong = path.join(dir, 'genesis-wrong.json');
    const off = ACCOUNTS[0]!;
    const doc2 = JSON.parse(genesisFile(chain)) as { mainnet: Record<string, string> };
    doc2.mainnet[off] = String(BigInt(doc2.mainnet[off]!) + 1n);
    await writeFile(wrong, JSON.stringify(doc2));
    const bad = await runCliCapturing(['reconcile', '--lake', lake, '--genesis', wrong]);
    expect(bad.code, bad.stderr).toBe(5);
    expect(bad.stdout).toMatch(new RegExp(`^reconciled ${doc.balances - 1} of ${doc.balances} balances .*: 1 differ, 0 unchecked`));
    expect(bad.stdout).toContain(`differs   mainnet`);
    expect(bad.stdout).toMatch(new RegExp(`${off} native: difference of -1 over a whole history`));
    // Reconciling again replaced the rows (one per address and asset), it did not add to them.
    expect((await queryCatalog(lake, 'SELECT count(*) AS n FROM reconciliation'))[0]!.n).toBe(BigInt(doc.balances));

    // Without the genesis allocations no native balance can be judged (the opening balance is unknown): exit 0.
    const none = await runCliCapturing(['reconcile', '--lake', lake]);
    expect(none.code, none.stderr).toBe(0);
    expect(none.stdout).toContain(`${ACCOUNTS.length} unchecked`);
    expect(none.stdout).toMatch(/unchecked mainnet \S+ 0x[0-9a-f]{40} native: opening balance unknown/);
  });

  it.skipIf(!HAS_REF)(
    "reconciling again while another DuckLake writer commits to the table merges again from its new rows: that writer's row stays",
    async () => {
      const raced = path.join(dir, 'raced');
      await cp(lake, raced, { recursive: true });
      // The copy's catalog records where its files are (the reference writes there).
      await rebuildCatalog(new LakePaths(raced));
      const first = await reconcileLocalLake(new LakePaths(raced), { genesis });
      let prepared = 0;
      onTestHook(async (step) => {
        if (step !== 'prepared' || prepared++ > 0) return;
        await withReference(
          path.join(raced, 'catalog.duckdb'),
          [
            `INSERT INTO lake.reconciliation (address, asset, network, snapshot_date, _run_id, _ingested_at)
         SELECT '0xref', 'native', network, snapshot_date, 'reference', TIMESTAMPTZ '2026-01-01 00:00:00+00' FROM lake.reconciliation LIMIT 1`,
          ],
          { as: 'lake' },
        );
      });
      try {
        const again = await reconcileLocalLake(new LakePaths(raced), { genesis });
        expect(again.rowsOut).toEqual(first.rowsOut);
      } finally {
        onTestHook();
      }
      expect(prepared).toBe(2);
      const ref = await withReference(path.join(raced, 'catalog.duckdb'), ['SELECT address, asset, difference FROM lake.reconciliation ORDER BY ALL'], {
        as: 'lake',
      });
      expect(ref).toHaveLength(first.rowsOut.length + 1);
      expect(ref.filter((r) => r.address === '0xref')).toHaveLength(1);
      const mine = await queryCatalog(raced, 'SELECT address, asset, difference FROM reconciliation ORDER BY ALL');
      expect(mine).toEqual(ref);
    },
    120_000,
  );
});
