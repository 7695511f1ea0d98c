// `chainlake verify` on real lakes against the real simulator: a clean lake holds; a lake another DuckLake writer
// deleted rows from differs in exactly that window, `--repair` fetches that window alone and verify holds after; a
// row the API does not list, added by another writer, is deleted by the repair (its window replaces its rows);
// a listing that ignores its block range filter is detected (by verify, and refused by a run).
import { existsSync } from 'node:fs';
import { cp, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJob, type Job } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { planVerifySession, verifySession } from '../../src/pipeline/verify/session.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { REFERENCE_DIR, withReference } from '../ducklake/helpers.js';
import { runCliCapturing } from '../helpers/cli.js';
import { singleMachineRows } from '../distributed/helpers.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

const A = '0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c';
const B = '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157';
const HAS_REF = existsSync(path.join(REFERENCE_DIR, 'ducklake.duckdb_extension'));

let sim: RunningSimulator;
let tmp: Awaited<ReturnType<typeof tempDir>>;
/** The job's lake, exported once: each test that verifies (verifications, request_usage) or alters it works on a copy. */
let base: string;

const jobDoc = (lake: string, extra: Record<string, unknown> = {}) => ({
  name: 'verify-test',
  network: 'mainnet',
  target: 'simulator',
  simulator: { seed: 1, scale: 'small' },
  lake,
  // Fixed chunks: several committed windows per scope.
  range: { fromBlock: 0, toBlock: 'head', windowBlocks: 6000 },
  datasets: { transactions: { addresses: [A, B] } },
  ...extra,
});
const jobOf = (lake: string, extra?: Record<string, unknown>): Job => parseJob(jobDoc(lake, extra), 'verify-test', process.env);

/** Statements of another DuckLake writer (the reference extension), the lake attached as `lake`; the last one's rows. */
const withRef = (lake: string, statements: string[]) => withReference(path.join(lake, 'catalog.duckdb'), statements, { as: 'lake' });

beforeAll(async () => {
  sim = await startSimulator({ seed: 1, scale: 'small' });
  tmp = await tempDir('chainlake-verify-');
  base = path.join(tmp.dir, 'base');
  expect((await runJob(jobOf(base), { simulator: sim })).status).toBe('complete');
}, 120_000);

/** A copy of the exported lake at `lake` (its catalog names its files relative to the lake). */
async function copyOfBase(lake: string): Promise<void> {
  await cp(base, lake, { recursive: true });
}
afterAll(async () => {
  await sim?.close();
  await tmp?.cleanup();
});

describe('chainlake verify (local lake)', () => {
  it('a clean lake holds: every window held, one request per scope, findings in the verifications table', async () => {
    const lake = path.join(tmp.dir, 'clean');
    const job = jobOf(lake);
    await copyOfBase(lake);
    // The plan: one request per scope, and nothing sent to say so.
    const sent = sim.stats().requests;
    expect(await planVerifySession(job, { kind: 'local', lake }, {})).toEqual({
      windows: 14,
      requests: 2,
      exportRequests: expect.any(Number),
      notCheckable: 0,
    });
    expect(sim.stats().requests).toBe(sent);
    const s = await verifySession(job, { kind: 'local', lake }, {}, { simulator: sim });
    expect(s.rows.filter((r) => r.status === 'differs')).toEqual([]);
    expect(s.holds).toBe(true);
    const counts = s.rows.filter((r) => r.check === 'count');
    expect(counts.length).toBeGreaterThanOrEqual(2 * 6);
    expect(counts.every((r) => r.status === 'held')).toBe(true);
    // Consecutive windows of a scope are asked as one range: one request per scope when everything holds.
    expect(s.requests).toBe(2);
    expect(s.exportRequests).toBeGreaterThan(s.requests);
    for (const check of ['gaps', 'rows_in_windows', 'duplicate_keys', 'nonces', 'range_filter'])
      expect(s.rows.some((r) => r.check === check && r.status === 'held')).toBe(true);
    const recorded = await queryCatalog(lake, `SELECT status, count(*) AS n FROM verifications WHERE verify_id = '${s.verifyId}' GROUP BY status`);
    expect(recorded).toEqual([{ status: 'held', n: BigInt(s.rows.length) }]);
    const usage = await queryCatalog(lake, `SELECT requests FROM request_usage WHERE run_id = '${s.verifyId}'`);
    expect(usage).toEqual([{ requests: 2n }]);
  }, 120_000);

  it("every dataset whose listing carries a count is counted, event_logs (no block number) by its blocks' times", async () => {
    const lake = path.join(tmp.dir, 'datasets');
    const job = jobOf(lake, {
      datasets: {
        internal_transactions: { addresses: [A, sim.examples.whale] },
        // Two endpoints listing one scope: each is counted against its own rows (origin_endpoint).
        erc721_transfers: { addresses: [sim.examples.nftHolder], endpoints: ['account_erc721_transfers', 'erc721_token_transfers'] },
        event_logs: { contracts: [sim.examples.verifiedContract], topics: [sim.examples.transferTopic] },
      },
    });
    expect((await runJob(job, { simulator: sim })).status).toBe('complete');
    const s = await verifySession(job, { kind: 'local', lake }, {}, { simulator: sim });
    expect(s.rows.filter((r) => r.status === 'differs')).toEqual([]);
    const counts = s.rows.filter((r) => r.check === 'count');
    for (const scope of [`address=${A}`, `address=${sim.examples.whale}`]) {
      const mine = counts.filter((r) => r.dataset === 'internal_transactions' && r.scope?.startsWith(`${scope}&`));
      expect(mine.length, scope).toBeGreaterThan(0);
      expect(mine.every((r) => r.status === 'held')).toBe(true);
    }
    for (const endpoint of ['account_erc721_transfers', 'erc721_token_transfers']) {
      const mine = counts.filter((r) => r.dataset === 'erc721_transfers' && r.scope?.includes(`endpoint=${endpoint}`));
      expect(mine.length, endpoint).toBeGreaterThan(0);
      expect(mine.every((r) => r.status === 'held')).toBe(true);
    }
    // The counts compared are real: rows were counted, and where a window was asked alone its count is the lake's.
    for (const dataset of ['internal_transactions', 'erc721_transfers']) {
      const mine = counts.filter((r) => r.dataset === dataset);
      expect(
        mine.reduce((n, r) => n + r.lakeCount!, 0),
        dataset,
      ).toBeGreaterThan(0);
      for (const r of mine) if (r.apiCount !== null) expect(r.lakeCount).toBe(r.apiCount);
    }
    const logs = counts.filter((r) => r.dataset === 'event_logs');
    expect(logs.length).toBeGreaterThan(0);
    // Rows without a block number, counted by the times of their range's ends.
    for (const r of logs) expect(r.status).toBe('held');
    // (This scope has no log in the simulator's range: test/ops/verify-logs.test.ts counts real ones.)
    for (const dataset of ['internal_transactions', 'erc721_transfers'])
      expect(s.rows.find((r) => r.dataset === dataset && r.check === 'rows_in_windows')?.status, dataset).toBe('held');
  }, 180_000);

  it('--since/--until by UTC day: exactly the windows reaching blocks of those days, turned into blocks by the lake rows', async () => {
    const lake = path.join(tmp.dir, 'days');
    const job = jobOf(lake);
    await copyOfBase(lake);
    const days = await queryCatalog(lake, 'SELECT DISTINCT CAST(block_date AS VARCHAR) AS d FROM transactions ORDER BY 1');
    expect(days.length).toBeGreaterThan(2);
    const day = String(days[Math.floor(days.length / 2)]!.d);
    const [b] = await queryCatalog(
      lake,
      `SELECT min(block_number) FILTER (WHERE timestamp >= DATE '${day}') AS lo, max(block_number) FILTER (WHERE timestamp < DATE '${day}' + INTERVAL 1 DAY) AS hi FROM transactions`,
    );
    const expected = await queryCatalog(
      lake,
      `SELECT scope, from_block, to_block FROM windows WHERE status = 'committed' AND to_block >= ${b!.lo} AND from_block <= ${b!.hi} ORDER BY scope, from_block`,
    );
    const all = await queryCatalog(lake, "SELECT count(*) AS n FROM windows WHERE status = 'committed'");
    expect(expected.length).toBeGreaterThan(0);
    expect(expected.length).toBeLessThan(Number(all[0]!.n));
    const s = await verifySession(job, { kind: 'local', lake }, { since: day, until: day }, { simulator: sim });
    const counted = s.rows
      .filter((r) => r.check === 'count')
      .map((r) => ({ scope: r.scope, from_block: BigInt(r.fromBlock!), to_block: BigInt(r.toBlock!) }))
      .sort((x, y) => (x.scope! < y.scope! ? -1 : x.scope! > y.scope! ? 1 : Number(x.from_block - y.from_block)));
    expect(counted).toEqual(expected);
    expect(s.rows.filter((r) => r.status === 'differs')).toEqual([]);
    // A day the lake holds no row of selects nothing.
    const none = await verifySession(job, { kind: 'local', lake }, { since: '2999-01-01' }, { simulator: sim });
    expect(none.rows.filter((r) => r.check === 'count')).toEqual([]);
  }, 120_000);

  it("stops at the job's daily request quota: the scopes it could not ask are not checked, with why, and the quota is not passed", async () => {
    const lake = path.join(tmp.dir, 'quota');
    await copyOfBase(lake);
    const spent = async () => Number((await queryCatalog(lake, 'SELECT sum(requests) AS n FROM request_usage'))[0]!.n);
    const used = await spent();
    // Room for one request: the first scope is asked (one request while it holds), the second is not.
    const job = jobOf(lake, { dailyRequestQuota: used + 1 });
    const s = await verifySession(job, { kind: 'local', lake }, {}, { simulator: sim });
    expect(s.quotaReached).toEqual({ limit: used + 1 });
    expect(s.requests).toBe(1);
    expect(s.holds).toBe(true);
    const counts = s.rows.filter((r) => r.check === 'count');
    const asked = counts.filter((r) => r.status === 'held');
    const cut = counts.filter((r) => r.status === 'not-checked');
    expect(asked.length).toBeGreaterThan(0);
    expect(cut.length).toBeGreaterThan(0);
    expect(new Set(asked.map((r) => r.scope)).size).toBe(1);
    expect(new Set(cut.map((r) => r.scope)).size).toBe(1);
    expect(asked[0]!.scope).not.toBe(cut[0]!.scope);
    for (const r of cut) expect(r.detail).toMatch(/daily request quota of \d+ requests is spent/);
    expect(await spent()).toBe(used + 1);
  }, 120_000);

  it.skipIf(!HAS_REF)(
    'rows deleted by another writer: that window differs (exit 5), --repair fetches it alone, then verify holds',
    async () => {
      const lake = path.join(tmp.dir, 'altered');
      const job = jobOf(lake);
      await copyOfBase(lake);
      const [w] = await queryCatalog(lake, `SELECT from_block, to_block FROM windows WHERE scope = 'address=${A}' AND from_block = 12000`);
      expect(w).toBeDefined();
      await withRef(lake, [
        `DELETE FROM lake.transactions WHERE transaction_hash IN (SELECT transaction_hash FROM lake.transactions
         WHERE sender = '${A}' AND block_number BETWEEN 12000 AND 17999 ORDER BY transaction_hash LIMIT 2)`,
      ]);

      // The command as a user runs it (the job's embedded simulator is the same chain): exit 5, the window named.
      const jobFile = path.join(tmp.dir, 'altered.json');
      await writeFile(jobFile, JSON.stringify(jobDoc(lake)));
      // A local lake's requests count against the explorer's URL: a named account is refused, before anything is sent.
      const named = await runCliCapturing(['verify', jobFile, '--account', 'verifier']);
      expect(named.code).toBe(2);
      expect(named.stderr).toMatch(/--account names an account of a distributed lake; .* is a local lake/);
      const cli = await runCliCapturing(['verify', jobFile, '--format', 'json']);
      expect(cli.code).toBe(5);
      // What it prints is the session: its findings, row by row.
      const s = JSON.parse(cli.stdout) as Awaited<ReturnType<typeof verifySession>> & { differing: string[] };
      expect(s.differing).toEqual([`transactions/mainnet/address=${A}/12000-17999`]);
      expect(s.holds).toBe(false);
      const differs = s.rows.filter((r) => r.status === 'differs');
      expect(differs).toEqual([
        expect.objectContaining({
          check: 'count',
          dataset: 'transactions',
          scope: `address=${A}`,
          fromBlock: 12000,
          toBlock: 17999,
          apiCount: expect.any(Number),
        }),
        // The two were A's own sent transactions, and the lake holds A's whole history: their nonces are holes.
        expect.objectContaining({
          check: 'nonces',
          scope: `address=${A}`,
          status: 'differs',
          detail: expect.stringMatching(/^2 nonces below \d+ are missing$/),
        }),
      ]);
      expect(differs[0]!.apiCount! - differs[0]!.lakeCount!).toBe(2);

      const repaired = await verifySession(job, { kind: 'local', lake }, {}, { simulator: sim, repair: true });
      expect(repaired.repair?.status).toBe('complete');
      // The session verifies again after repairing: its own findings are the lake after the repair.
      expect(repaired.beforeRepair?.differing.map((d) => d.id)).toEqual([`transactions/mainnet/address=${A}/12000-17999`]);
      expect(repaired.holds).toBe(true);
      // Exactly the differing window was fetched again: the repair run's only window, and nothing of B.
      const fetched = await queryCatalog(lake, `SELECT scope, from_block, to_block FROM windows WHERE run_id = '${repaired.repair!.runId}'`);
      expect(fetched).toEqual([{ scope: `address=${A}`, from_block: 12000n, to_block: 17999n }]);
      expect(repaired.rows.filter((r) => r.check === 'count').every((r) => r.status === 'held')).toBe(true);
    },
    180_000,
  );

  it.skipIf(!HAS_REF)(
    'a row the API does not list, added by another writer: that window differs, --repair deletes it in the same snapshot, then verify holds',
    async () => {
      const lake = path.join(tmp.dir, 'extra');
      await copyOfBase(lake);
      // A copy of one of A's transactions under a hash no chain holds: a row of A's scope and of blocks 12000-17999.
      const ghost = `0x${'e'.repeat(64)}`;
      await withRef(lake, [
        `INSERT INTO lake.transactions SELECT * REPLACE ('${ghost}' AS transaction_hash) FROM lake.transactions
         WHERE sender = '${A}' AND block_number BETWEEN 12000 AND 17999 ORDER BY transaction_hash LIMIT 1`,
      ]);
      // Read as another DuckLake reader does (the catalog's own views are refreshed by chainlake's commits only).
      const ghosts = async () => (await withRef(lake, [`SELECT count(*) AS n FROM lake.transactions WHERE transaction_hash = '${ghost}'`]))[0]!.n;
      await expect(ghosts()).resolves.toBe(1n);
      const window = `transactions/mainnet/address=${A}/12000-17999`;
      const jobFile = path.join(tmp.dir, 'extra.json');
      await writeFile(jobFile, JSON.stringify(jobDoc(lake)));
      // The repair's session verifies first (beforeRepair, as a verify alone finds it: the test above checks that
      // verify alone exits 5 on a differing window), repairs, and verifies again.
      const snapshots = async () => Number((await queryCatalog(lake, `SELECT count(*) AS n FROM ducklake_snapshot`))[0]!.n);
      const before = await snapshots();
      const repaired = await runCliCapturing(['verify', jobFile, '--format', 'json', '--repair']);
      expect(repaired.code, repaired.stderr).toBe(0);
      const r = JSON.parse(repaired.stdout);
      expect(r.beforeRepair.differing).toEqual([window]);
      expect(r.beforeRepair.holds).toBe(false);
      expect(r.holds).toBe(true);
      // The row is gone, in the repair's one snapshot; the verify after the repair holds (r.holds), and the rows are a
      // fresh export's.
      await expect(ghosts()).resolves.toBe(0n);
      expect(await snapshots()).toBe(before + 1);
      // The exported lake, never altered, is that fresh export.
      expect((await singleMachineRows(lake, ['transactions'])).get('transactions')).toEqual(
        (await singleMachineRows(base, ['transactions'])).get('transactions'),
      );
    },
    240_000,
  );

  it.skipIf(!HAS_REF)(
    'a repair of many windows commits them in one snapshot',
    async () => {
      const lake = path.join(tmp.dir, 'many');
      // 1,000-block windows over the first 12,000 blocks, a row gone from each window holding one of A's
      // transactions (A alone: B's windows would only be verified again): twelve windows differ and are repaired.
      const job = jobOf(lake, { range: { fromBlock: 0, toBlock: 11_999, windowBlocks: 1000 }, datasets: { transactions: { addresses: [A] } } });
      expect((await runJob(job, { simulator: sim })).status).toBe('complete');
      await withRef(lake, [
        `DELETE FROM lake.transactions WHERE transaction_hash IN (SELECT min(transaction_hash) FROM lake.transactions
       WHERE sender = '${A}' GROUP BY block_number // 1000)`,
      ]);
      const snapshots = async () => Number((await queryCatalog(lake, `SELECT count(*) AS n FROM ducklake_snapshot`))[0]!.n);
      const before = await snapshots();
      const s = await verifySession(job, { kind: 'local', lake }, {}, { simulator: sim, repair: true });
      expect(s.beforeRepair!.differing.length).toBeGreaterThan(10); // all 12
      expect(s.holds).toBe(true);
      expect(await snapshots()).toBe(before + 1);
    },
    240_000,
  );

  it('an API whose listing ignores the block range filter is detected by verify (test/extract/range-filter.test.ts: a run refuses it)', async () => {
    const lake = path.join(tmp.dir, 'ranged');
    // A lake of blocks from 6000 on: the union of its windows is not the whole history.
    const job = jobOf(lake, { range: { fromBlock: 6000, toBlock: 'head', windowBlocks: 6000 } });
    expect((await runJob(job, { simulator: sim })).status).toBe('complete');
    const ignoring = await startSimulator({ seed: 1, scale: 'small', dialect: 'real', ignoresRangeFilter: true });
    try {
      const s = await verifySession(job, { kind: 'local', lake }, {}, { simulator: ignoring });
      expect(s.holds).toBe(false);
      const filter = s.rows.filter((r) => r.check === 'range_filter' && r.status === 'differs');
      expect(filter.length).toBeGreaterThan(0);
      expect(filter[0]!.detail).toMatch(/ignores the block range filter/);
      // Nothing is marked held on the word of such a listing, and repair has nothing to fetch from it.
      const counts = s.rows.filter((r) => r.check === 'count' && filter.some((f) => f.scope === r.scope));
      expect(counts.every((r) => r.status === 'not-checked')).toBe(true);
      expect(s.differing).toEqual([]);
    } finally {
      await ignoring.close();
    }
  }, 180_000);
});
