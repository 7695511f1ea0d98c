// A distributed lake is shared with other DuckLake writers as a local one is (test/load/shared-lake.test.ts): a
// user's DuckDB with the reference `ducklake` extension (../shared/ducklake-ref/) writes into the PostgreSQL catalog:
// rows inlined into the catalog (its default for small writes), deletes, data and delete files, and runs its merge,
// expiry and cleanup. chainlake then reads exactly what the reference reads (the library reader `query --catalog`
// opens, the status `status --catalog` computes), and a further distributed commit merges the inlined rows instead of refusing or losing them.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../../src/distributed/control-plane.js';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { controlPlanLedger } from '../../src/distributed/plan-ledger.js';
import { estimatePlan } from '../../src/pipeline/estimate.js';
import { formatPlan } from '../../src/cli/commands/plan.js';
import { compactDistributedLake } from '../../src/distributed/maintain.js';
import { openDistributedLake } from '../../src/distributed/read.js';
import { runWorker } from '../../src/distributed/worker.js';
import { lakeStatus } from '../../src/load/read/status.js';
import { parseJob } from '../../src/pipeline/job.js';
import { chainlakeCodeOf } from '../../src/errors.js';
import { onTestHook } from '../../src/load/test-hooks.js';
import { A_BUSY0, A_ERC20_0 } from '../../src/simulator/chain.js';
import { STANDARD_SIGNATURES } from '../../src/simulator/token-events.js';
import { decodeDistributedLake } from '../../src/distributed/decode.js';
import { resolveDatasets } from '../../src/decode/spec.js';
import { parseAbiItem, toEventSelector, type AbiEvent } from 'viem';
import { chainFor } from '../../src/simulator/index.js';
import { referenceMissing, withReference } from '../ducklake/helpers.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { tempDir } from '../helpers/lake.js';
import { chainlakeQuery, INSERT, inserted, jobDoc } from './helpers.js';

type Rows = Record<string, unknown>[];
const json = (rows: Rows) => JSON.stringify(rows, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
/** Rows as plain values (bigints as text), for a comparison that shows which rows and columns differ. */
const plain = (rows: Rows) => rows.map((r) => json([r]));

const chain = chainFor(1, 'small', 'mainnet');
const ADDRESSES = [1, 2, 3].map((i) => chain.addrLower(A_BUSY0 + i));

const victim = (day: string) =>
  `DELETE FROM ref.transactions WHERE transaction_hash = (SELECT min(transaction_hash) FROM ref.transactions WHERE block_date = DATE '${day}')`;

const missing = referenceMissing();

describe.skipIf(missing !== null)(
  `a distributed lake shared with the reference DuckLake extension (PostgreSQL catalog)${missing ? ` (${missing})` : ''}`,
  () => {
    let pg: TestPostgres;
    let tmp: Awaited<ReturnType<typeof tempDir>>;
    let db: Awaited<ReturnType<TestPostgres['database']>>;
    let store: string;
    let before: Rows;
    let days: string[];

    const withRef = (statements: string[], opts: { inlining?: number } = {}) => withReference(db.url, statements, opts);
    const refRows = () => withRef(['SELECT * FROM ref.transactions ORDER BY transaction_hash']);

    /** Every row of transactions as the library reader (what `query --catalog` opens) reads them. */
    const chainlakeRows = () => chainlakeQuery(db.url, store, 'SELECT * FROM transactions ORDER BY transaction_hash');

    async function distributedRun(name: string, addresses: readonly string[], lake = { catalog: db.url, store }): Promise<void> {
      const doc = jobDoc(name, addresses);
      await enqueueJob(parseJob(doc, name, process.env), doc, lake);
      // One worker: what is shared here is the lake, with the reference's writes; workers side by side are workers.test.ts's.
      const report = await runWorker({ ...lake, id: `${name}-w1`, account: 'w1', untilIdle: true, pollMs: 50 });
      expect(report.windowsFailed).toBe(0);
    }

    beforeAll(async () => {
      pg = await startPostgres();
      tmp = await tempDir('chainlake-shared-pg-');
      db = await pg.database();
      store = path.join(tmp.dir, 'store');
      await distributedRun('one', ADDRESSES.slice(0, 1));
    }, 180_000);

    afterAll(async () => {
      await pg?.stop();
      await tmp?.cleanup();
    });

    it("chainlake reads the reference's inlined rows and deletes, its data and delete files, after its merge, expiry and cleanup", async () => {
      days = (await withRef(['SELECT DISTINCT CAST(block_date AS VARCHAR) AS d FROM ref.transactions ORDER BY 1'])).map((r) => String(r.d));
      expect(days.length).toBeGreaterThanOrEqual(4);
      // Small writes, inlined into the PostgreSQL catalog: into a day chainlake wrote and a day it never wrote, and a
      // delete of a row of one of chainlake's files.
      await withRef([INSERT + [inserted('0xref-a', days[0]!, 1), inserted('0xref-b', '2030-01-01', 2)].join(', '), victim(days[1]!)]);
      // Without inlining: a data file beside chainlake's in a partition, and a delete file.
      await withRef([INSERT + inserted('0xref-c', days[2]!, 3), victim(days[3]!)], { inlining: 0 });
      const changes = (await withRef(['SELECT changes FROM ref.snapshots() ORDER BY snapshot_id DESC LIMIT 4'])).map((r) => json([{ changes: r.changes }]));
      expect(changes.join(' ')).toMatch(/inlined_insert|inlined_delete/);
      await withRef([
        "CALL ducklake_merge_adjacent_files('ref')",
        "CALL ducklake_expire_snapshots('ref', older_than => now() + INTERVAL 1 HOUR)",
        "CALL ducklake_cleanup_old_files('ref', cleanup_all => true)",
      ]);

      before = await refRows();
      expect(before.map((r) => r.transaction_hash)).toEqual(expect.arrayContaining(['0xref-a', '0xref-b', '0xref-c']));
      expect(plain(await chainlakeRows())).toEqual(plain(before));

      // `status --catalog` counts the rows a reader reads (it opens the lake as lakeStatus reads it).
      const lake = await openDistributedLake({ catalog: db.url, store, datasets: false });
      const status = await lakeStatus(lake.conn, { name: 'distributed' }).finally(() => lake.close());
      const tx = status.datasets.find((d) => d.dataset === 'transactions' && d.network === 'mainnet');
      expect(tx?.rows).toBe(before.length);
    }, 180_000);

    it("a further distributed commit merges the reference's inlined rows: both read the same rows after, one per key", async () => {
      expect(before, 'the lake of the test before').toBeDefined();
      await distributedRun('three', ADDRESSES);
      const after = await refRows();
      const hashes = after.map((r) => String(r.transaction_hash));
      expect(new Set(hashes).size).toBe(hashes.length);
      // Every row the lake held is still there (the reference's included), and the run added rows.
      expect(hashes).toEqual(expect.arrayContaining(before.map((r) => String(r.transaction_hash))));
      expect(after.length).toBeGreaterThan(before.length);
      for (const hash of ['0xref-a', '0xref-b', '0xref-c']) expect(after.find((r) => r.transaction_hash === hash)?._run_id, hash).toBe('reference');
      expect(plain(await chainlakeRows())).toEqual(plain(after));
    }, 180_000);

    it('compact clears a day another writer emptied, whose current file holds only deleted rows', async () => {
      expect(days, 'the lake of the tests before').toBeDefined();
      const day = days[days.length - 1]!;
      // As on one machine (test/load/shared-lake.test.ts): a file of the reference's beside chainlake's, the day's other
      // rows deleted (chainlake's file goes), then its one row (an inlined delete): the day keeps a current file, with
      // no row in it.
      await withRef([INSERT + inserted('0xref-e', day, 5)], { inlining: 0 });
      await withRef([`DELETE FROM ref.transactions WHERE block_date = DATE '${day}' AND transaction_hash <> '0xref-e'`], { inlining: 0 });
      await withRef([`DELETE FROM ref.transactions WHERE transaction_hash = '0xref-e'`]);
      const dayFiles = () =>
        withRef([
          `SELECT count(*) AS n FROM __ducklake_metadata_ref.ducklake.ducklake_data_file WHERE end_snapshot IS NULL AND path LIKE '%block_date=${day}/%'`,
        ]);
      expect(await dayFiles()).toEqual([{ n: 1n }]);
      const before = await refRows();
      expect(before.some((r) => String(r.block_date).startsWith(day))).toBe(false);
      const report = await compactDistributedLake({ catalog: db.url, store });
      expect(report.partitions).toBeGreaterThanOrEqual(1);
      expect(await dayFiles()).toEqual([{ n: 0n }]);
      expect(plain(await refRows())).toEqual(plain(before));
      expect(plain(await chainlakeRows())).toEqual(plain(before));
    }, 180_000);

    it.each([
      { drop: 'dropped and expired', expire: true },
      { drop: 'dropped (not expired)', expire: false },
    ])(
      "a table $drop by another writer voids the ledger's claims: enqueue queues its whole range again, and says so",
      async ({ expire }) => {
        const lake = { catalog: (await pg.database()).url, store: path.join(tmp.dir, expire ? 'store-expired' : 'store-dropped') };
        const doc = { ...jobDoc('nightly', ADDRESSES.slice(0, 2)), range: { incremental: true } };
        const job = parseJob(doc, 'nightly', process.env);
        const nightly = async (id: string, queuedThen?: () => Promise<void>) => {
          const queued = await enqueueJob(job, doc, lake);
          await queuedThen?.();
          const report = await runWorker({ ...lake, id, account: 'w1', untilIdle: true, pollMs: 50 });
          expect(report.windowsFailed).toBe(0);
          return queued;
        };
        const ref = (statements: string[]) => withReference(lake.catalog, statements);
        const rows = async () =>
          new Map((await ref(['SELECT * EXCLUDE (_run_id, _ingested_at, confirmations) FROM ref.transactions'])).map((r) => [r.transaction_hash, json([r])]));
        const client = await connect(lake.catalog);
        try {
          const marks = async () =>
            (await client.query(`SELECT count(*)::int AS n, max(block)::int AS block FROM chainlake.watermarks WHERE dataset = 'transactions'`)).rows;
          expect((await nightly('expired-1')).queued).toBeGreaterThan(0);
          const before = await rows();
          const [{ block }] = (await marks()) as [{ block: number }];
          expect(before.size).toBeGreaterThan(0);
          const snapshot = async () => (await client.query(`SELECT max(snapshot_id)::int AS s FROM ducklake.ducklake_snapshot`)).rows[0]!.s as number;
          const readable = await snapshot();
          await ref([
            'DROP TABLE ref.transactions',
            ...(expire
              ? ["CALL ducklake_expire_snapshots('ref', older_than => now() + INTERVAL 1 HOUR)", "CALL ducklake_cleanup_old_files('ref', cleanup_all => true)"]
              : []),
          ]);
          const dropped = await snapshot();
          expect((await client.query(`SELECT count(*)::int AS n FROM ducklake.ducklake_table WHERE table_name = 'transactions'`)).rows).toEqual([
            { n: expire ? 0 : 1 },
          ]);

          const counted = `the ledger counts blocks up to ${block} of 2 scopes on mainnet of transactions as loaded, but `;
          const says = new RegExp(
            expire
              ? `${counted}the lake has no table transactions nor any record of one`
              : `${counted}another DuckLake writer dropped the lake's table transactions \\(snapshot ${dropped}\\): those claims are void, and transactions's whole range is fetched again into a new table; the dropped table's rows stay readable in the snapshots before the drop until they are expired \\(SELECT \\* FROM transactions AT \\(VERSION => ${readable}\\)\\)`,
          );
          const plan = await estimatePlan(job, { probe: false, ledger: controlPlanLedger(client, lake.catalog), verifyTarget: null });
          expect(plan.voided).toEqual([{ dataset: 'transactions', scopes: 2, block, windows: 0, ...(expire ? {} : { dropped, readable }) }]);
          expect(formatPlan(plan)).toMatch(says);

          // The watermarks go with the run's record, before a commit makes the table again: a run whose windows fail
          // leaves no mark that the table made again would be taken to hold.
          const queued = await nightly('expired-2', async () => expect(await marks()).toEqual([{ n: 0, block: null }]));
          expect(queued.voided?.map((v) => v.dataset)).toEqual(['transactions']);
          expect(queued.queued).toBeGreaterThan(0);
          const after = await rows();
          expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
          for (const [key, row] of before) expect(after.get(key), String(key)).toBe(row);
          expect(await marks()).toEqual([{ n: 2, block }]);
          if (expire) return;
          // The time travel the message names reads the dropped table's rows, beside the table made again.
          const old = await ref([`USE ref`, `SELECT * EXCLUDE (_run_id, _ingested_at, confirmations) FROM transactions AT (VERSION => ${readable})`]);
          expect(new Map(old.map((r) => [r.transaction_hash, json([r])]))).toEqual(before);

          // Dropped after a run was planned (its claims stand): the commit refuses rather than start an empty table the
          // ledger's marks would be taken to hold, and says how to plan it again.
          const full = jobDoc('full', ADDRESSES.slice(0, 2));
          expect((await enqueueJob(parseJob(full, 'full', process.env), full, lake)).queued).toBeGreaterThan(0);
          await ref(['DROP TABLE ref.transactions']);
          const failed = await runWorker({ ...lake, id: 'dropped-late', account: 'w1', untilIdle: true, pollMs: 50 }).then(
            () => undefined,
            (e: unknown) => e as { code?: string; message: string; hint?: string },
          );
          expect(failed?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
          expect(failed?.message).toMatch(
            /the lake's table transactions was dropped by another DuckLake writer \(snapshot \d+\) and no run has planned it since/,
          );
          expect(failed?.hint).toMatch(/catalog rebuild --catalog/);
          expect(await marks()).toEqual([{ n: 2, block }]);
        } finally {
          await client.end();
        }
      },
      180_000,
    );

    it("a table another writer drops and creates again under its name voids the ledger's claims: enqueue queues its whole range again into the table as it is (keeping that writer's rows), records the void in the run, and voids once; a run planned before it is refused at its commit and its take-up voids it", async () => {
      const lake = { catalog: (await pg.database()).url, store: path.join(tmp.dir, 'store-recreated') };
      const doc = { ...jobDoc('nightly', ADDRESSES.slice(0, 2)), range: { incremental: true } };
      const job = parseJob(doc, 'nightly', process.env);
      const ref = (statements: string[]) => withReference(lake.catalog, statements);
      const rows = async () =>
        new Map((await ref(['SELECT * EXCLUDE (_run_id, _ingested_at, confirmations) FROM ref.transactions'])).map((r) => [r.transaction_hash, json([r])]));
      const work = async (id: string) => expect((await runWorker({ ...lake, id, account: 'w1', untilIdle: true, pollMs: 50 })).windowsFailed).toBe(0);
      const client = await connect(lake.catalog);
      try {
        const marks = async () =>
          (await client.query(`SELECT count(*)::int AS n, max(block)::int AS block FROM chainlake.watermarks WHERE dataset = 'transactions'`)).rows;
        const snapshot = async () => (await client.query(`SELECT max(snapshot_id)::int AS s FROM ducklake.ducklake_snapshot`)).rows[0]!.s as number;
        await enqueueJob(job, doc, lake);
        await work('recreated-1');
        const before = await rows();
        const [{ block }] = (await marks()) as [{ block: number }];
        const readable = await snapshot();
        // Replaced by a table partitioned as chainlake's, holding the even blocks' rows only and a row of its own.
        await ref([
          'CREATE OR REPLACE TABLE ref.transactions AS SELECT * FROM ref.transactions WHERE false',
          'ALTER TABLE ref.transactions SET PARTITIONED BY (network, block_date)',
          `INSERT INTO ref.transactions SELECT * FROM ref.transactions AT (VERSION => ${readable}) WHERE block_number % 2 = 0`,
          `INSERT INTO ref.transactions SELECT * REPLACE ('0xfeed' AS transaction_hash) FROM ref.transactions LIMIT 1`,
        ]);
        const kept = await rows();
        expect([...before.keys()].filter((k) => !kept.has(k)).length).toBeGreaterThan(0);
        const dropped = readable + 1;
        const says = new RegExp(
          `the ledger counts blocks up to ${block} of 2 scopes on mainnet of transactions as loaded, but another DuckLake writer dropped the lake's table transactions \\(snapshot ${dropped}\\) and created another of that name \\(snapshot ${dropped}\\): those claims are void, and transactions's whole range is fetched again and merged into that table as it is now`,
        );
        const plan = await estimatePlan(job, { probe: false, ledger: controlPlanLedger(client, lake.catalog), verifyTarget: null });
        expect(plan.voided).toEqual([{ dataset: 'transactions', scopes: 2, block, windows: 0, dropped, readable, recreated: dropped }]);
        expect(formatPlan(plan)).toMatch(says);

        const queued = await enqueueJob(job, doc, lake);
        expect(queued.voided?.map((v) => v.dataset)).toEqual(['transactions']);
        expect(await marks()).toEqual([{ n: 0, block: null }]);
        // The run's own record says what it voided (what `query runs` reads).
        const recorded = await chainlakeQuery(lake.catalog, lake.store, `SELECT CAST(report AS VARCHAR) AS report FROM runs WHERE run_id = '${queued.runId}'`);
        expect(JSON.parse(String(recorded[0]?.report))).toMatchObject({
          runId: queued.runId,
          voided: [{ dataset: 'transactions', dropped, recreated: dropped }],
        });
        await work('recreated-2');
        const after = await rows();
        expect([...after.keys()].sort()).toEqual([...before.keys(), '0xfeed'].sort());
        for (const [key, row] of before) expect(after.get(key), String(key)).toBe(row);
        expect(await marks()).toEqual([{ n: 2, block }]);
        // Its claims are on the table as it is now: the next enqueue voids nothing.
        const next = await enqueueJob(job, doc, lake);
        expect(next.voided).toBeUndefined();
        await work('recreated-3');

        // Created again after a run was planned (its claims stand): the commit refuses, nothing written; the run's
        // take-up voids its claims and queues the whole range again.
        const full = jobDoc('full', ADDRESSES.slice(0, 2));
        const fullJob = parseJob(full, 'full', process.env);
        const { runId } = await enqueueJob(fullJob, full, lake);
        await ref([
          'CREATE OR REPLACE TABLE ref.transactions AS SELECT * FROM ref.transactions WHERE false',
          'ALTER TABLE ref.transactions SET PARTITIONED BY (network, block_date)',
        ]);
        const at = await snapshot();
        const failed = await runWorker({ ...lake, id: 'recreated-late', account: 'w1', untilIdle: true, pollMs: 50 }).then(
          () => undefined,
          (e: unknown) => e as { code?: string; message: string },
        );
        expect(failed?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
        expect(failed?.message).toMatch(
          /the lake's table transactions was dropped by another DuckLake writer \(snapshot \d+\) and another created under its name \(snapshot \d+\) after this run was planned/,
        );
        expect(await snapshot()).toBe(at);
        const taken = await enqueueJob(fullJob, full, lake);
        expect(taken).toMatchObject({ runId, resumed: true });
        expect(taken.voided?.map((v) => v.dataset)).toEqual(['transactions']);
        await work('recreated-4');
        const whole = await rows();
        for (const [key, row] of before) expect(whole.get(key), String(key)).toBe(row);
        const record = (await client.query(`SELECT report -> 'voided' AS voided FROM chainlake.runs WHERE run_id = $1`, [runId])).rows[0]?.voided;
        expect(record).toMatchObject([{ dataset: 'transactions', dropped: at - 1 }]);
      } finally {
        await client.end();
      }
    }, 240_000);

    it('an open run taken up after another writer dropped its table: enqueue queues again the windows it had committed and the range it lacked', async () => {
      const lake = { catalog: (await pg.database()).url, store: path.join(tmp.dir, 'store-open') };
      const ref = (statements: string[]) => withReference(lake.catalog, statements);
      const docOf = (addresses: readonly string[]) => ({ ...jobDoc('open', addresses), range: { incremental: true, windowBlocks: 12_000 } });
      const rowsOf = (list: Rows) =>
        new Map(list.map((r) => [String(r.transaction_hash), json([{ ...r, _run_id: null, _ingested_at: null, confirmations: null }])]));
      const first = docOf(ADDRESSES.slice(0, 1));
      await enqueueJob(parseJob(first, 'open', process.env), first, lake);
      expect((await runWorker({ ...lake, id: 'open-w0', untilIdle: true, pollMs: 50 })).windowsFailed).toBe(0);
      // The second address's windows only: the first one's mark is at the head. Committed one at a time, so that the
      // drop falls between two commits of the run.
      const doc = docOf(ADDRESSES.slice(0, 2));
      const job = parseJob(doc, 'open', process.env);
      const { runId } = await enqueueJob(job, doc, lake);
      let merges = 0;
      let readable = 0;
      const failed = await runWorker({
        ...lake,
        id: 'open-w1',
        untilIdle: true,
        pollMs: 50,
        commitWindows: 1,
        merged: async () => {
          if (++merges !== 2) return;
          readable = Number((await ref(['SELECT max(snapshot_id) AS s FROM ref.snapshots()']))[0]!.s);
          await ref(['DROP TABLE ref.transactions']);
        },
      }).catch((e: unknown) => e);
      expect(chainlakeCodeOf(failed)).toBe('CHAINLAKE_SCHEMA_CHANGED');
      const before = rowsOf(await ref(['USE ref', `SELECT * FROM transactions AT (VERSION => ${readable})`]));
      const client = await connect(lake.catalog);
      try {
        const states = async () =>
          (
            await client.query(
              `SELECT status, count(*)::int AS n, min(error) AS error FROM chainlake.windows WHERE run_id = $1 GROUP BY status ORDER BY status`,
              [runId],
            )
          ).rows as { status: string; n: number; error: string | null }[];
        const committed = (await states()).find((s) => s.status === 'committed')?.n ?? 0;
        expect(committed).toBeGreaterThan(0);

        const taken = await enqueueJob(job, doc, lake);
        expect(taken).toMatchObject({ runId, resumed: true });
        expect(taken.voided).toMatchObject([{ dataset: 'transactions', windows: committed, dropped: readable + 1, readable }]);
        // The void lasts before anything is fetched: no mark left, the committed windows queued again saying why, and
        // the first address's range (in the dropped table, never in this run) queued beside them.
        expect((await client.query(`SELECT count(*)::int AS n FROM chainlake.watermarks`)).rows).toEqual([{ n: 0 }]);
        const queued = (await states()).find((s) => s.status === 'queued');
        expect(queued?.n).toBeGreaterThan(committed);
        expect(queued?.error).toMatch(/another DuckLake writer dropped the lake's table transactions/);
        expect(taken.queued).toBe(queued?.n);
        const scopes = await client.query(`SELECT DISTINCT scope FROM chainlake.windows WHERE run_id = $1 ORDER BY 1`, [runId]);
        expect(scopes.rows).toHaveLength(2);

        expect((await runWorker({ ...lake, id: 'open-w2', untilIdle: true, pollMs: 50 })).windowsFailed).toBe(0);
        expect((await states()).map((s) => s.status)).toEqual(['committed']);
        const after = rowsOf(await ref(['SELECT * FROM ref.transactions']));
        for (const [key, row] of before) expect(after.get(key), key).toBe(row);
        // Row for row the lake of an undisturbed run of the job.
        const fresh = { catalog: (await pg.database()).url, store: path.join(tmp.dir, 'store-open-fresh') };
        await enqueueJob(job, doc, fresh);
        expect((await runWorker({ ...fresh, id: 'open-fresh', untilIdle: true, pollMs: 50 })).windowsFailed).toBe(0);
        const undisturbed = rowsOf(await withReference(fresh.catalog, ['SELECT * FROM ref.transactions']));
        expect(after.size).toBe(undisturbed.size);
        for (const [key, row] of undisturbed) expect(after.get(key), key).toBe(row);
      } finally {
        await client.end();
      }
    }, 180_000);

    it("a table another writer dropped while a run of another job on it is open: the next job's enqueue voids that run's claims too, and both runs commit into the table made again", async () => {
      const lake = { catalog: (await pg.database()).url, store: path.join(tmp.dir, 'store-two-jobs') };
      const ref = (statements: string[]) => withReference(lake.catalog, statements);
      const docOf = (name: string, addresses: readonly string[]) => ({ ...jobDoc(name, addresses), range: { incremental: true, windowBlocks: 12_000 } });
      const rowsOf = (list: Rows) =>
        new Map(list.map((r) => [String(r.transaction_hash), json([{ ...r, _run_id: null, _ingested_at: null, confirmations: null }])]));
      const left = docOf('left', ADDRESSES.slice(0, 1));
      const right = docOf('right', ADDRESSES.slice(1, 2));
      // Job left's run, committed one window at a time, stops at the drop after its first commit: open, a window committed.
      const { runId: leftRun } = await enqueueJob(parseJob(left, 'left', process.env), left, lake);
      let merges = 0;
      const failed = await runWorker({
        ...lake,
        id: 'two-w1',
        untilIdle: true,
        pollMs: 50,
        commitWindows: 1,
        merged: async () => {
          if (++merges === 2) await ref(['DROP TABLE ref.transactions']);
        },
      }).catch((e: unknown) => e);
      expect(chainlakeCodeOf(failed)).toBe('CHAINLAKE_SCHEMA_CHANGED');
      const client = await connect(lake.catalog);
      try {
        const states = async (runId: string) =>
          (await client.query(`SELECT status, count(*)::int AS n FROM chainlake.windows WHERE run_id = $1 GROUP BY status ORDER BY status`, [runId])).rows as {
            status: string;
            n: number;
          }[];
        const committed = (await states(leftRun)).find((s) => s.status === 'committed')?.n ?? 0;
        expect(committed).toBeGreaterThan(0);
        // Job right's enqueue plans on the dropped table: its claims, and the open run's of job left, are void.
        const planned = await enqueueJob(parseJob(right, 'right', process.env), right, lake);
        expect(planned.voided?.map((v) => v.dataset)).toEqual(['transactions']);
        expect((await states(leftRun)).find((s) => s.status === 'committed')).toBeUndefined();
        // Job left's run records the void itself (its report, which `query runs` reads), not only in its windows' errors.
        const leftRecord = await chainlakeQuery(lake.catalog, lake.store, `SELECT CAST(report AS VARCHAR) AS report FROM runs WHERE run_id = '${leftRun}'`);
        expect(JSON.parse(String(leftRecord[0]?.report))).toMatchObject({
          runId: leftRun,
          job: 'left',
          voided: [{ dataset: 'transactions', windows: committed }],
        });
        // One worker takes both runs' windows: every commit lands (none refused for the other run's claims).
        expect((await runWorker({ ...lake, id: 'two-w2', untilIdle: true, pollMs: 50 })).windowsFailed).toBe(0);
        for (const runId of [leftRun, planned.runId]) expect((await states(runId)).map((s) => s.status)).toEqual(['committed']);
        const runs = (await client.query(`SELECT job, status FROM chainlake.runs ORDER BY job`)).rows;
        expect(runs).toEqual([
          { job: 'left', status: 'complete' },
          { job: 'right', status: 'complete' },
        ]);
        // Row for row the lake of both jobs run undisturbed.
        const fresh = { catalog: (await pg.database()).url, store: path.join(tmp.dir, 'store-two-jobs-fresh') };
        await enqueueJob(parseJob(left, 'left', process.env), left, fresh);
        await enqueueJob(parseJob(right, 'right', process.env), right, fresh);
        expect((await runWorker({ ...fresh, id: 'two-fresh', untilIdle: true, pollMs: 50 })).windowsFailed).toBe(0);
        const undisturbed = rowsOf(await withReference(fresh.catalog, ['SELECT * FROM ref.transactions']));
        const after = rowsOf(await ref(['SELECT * FROM ref.transactions']));
        expect(after.size).toBe(undisturbed.size);
        for (const [key, row] of undisturbed) expect(after.get(key), key).toBe(row);
      } finally {
        await client.end();
      }
    }, 240_000);

    it('a decoded table another writer drops is refused by the commit and made again by decode --catalog; a dropped _rejects is made again, and enqueue says so', async () => {
      const lake = { catalog: (await pg.database()).url, store: path.join(tmp.dir, 'store-derived') };
      const ref = (statements: string[]) => withReference(lake.catalog, statements);
      const transfers = { address: chain.addrLower(A_ERC20_0), topics: [toEventSelector(parseAbiItem(STANDARD_SIGNATURES.erc20Transfer) as AbiEvent)] };
      const doc = {
        ...jobDoc('derived', []),
        range: { fromBlock: 0, toBlock: 6000 },
        datasets: { event_logs: { contracts: [transfers] } },
        decode: { standard: ['erc20'] },
      };
      const job = parseJob(doc, 'derived', process.env);
      const work = (id: string) =>
        runWorker({ ...lake, id, untilIdle: true, pollMs: 50 }).then(
          (r) => r,
          (e: unknown) => e as { code?: string; message: string; hint?: string },
        );
      await enqueueJob(job, doc, lake);
      expect(await work('derived-w1')).toMatchObject({ windowsFailed: 0 });
      const [{ table }] = (await ref([
        `SELECT table_name AS table FROM __ducklake_metadata_ref.ducklake.ducklake_table WHERE table_name LIKE 'erc20%' AND end_snapshot IS NULL`,
      ])) as [{ table: string }];
      const decoded = async () => json(await ref([`SELECT * EXCLUDE (_run_id, _ingested_at) FROM ref.${table} ORDER BY ALL`]));
      const before = await decoded();
      expect(before.length).toBeGreaterThan(2);

      await ref([`DROP TABLE ref.${table}`]);
      await enqueueJob(job, doc, lake);
      const refused = await work('derived-w2');
      expect(refused).toMatchObject({ code: 'CHAINLAKE_SCHEMA_CHANGED', hint: expect.stringMatching(/chainlake decode --catalog/) });
      expect((refused as Error).message).toMatch(
        new RegExp(`the lake's table ${table}, derived from the lake's other tables, was dropped by another DuckLake writer`),
      );
      const datasets = await resolveDatasets({ standard: ['erc20'], contracts: [] }, { network: 'mainnet' });
      await decodeDistributedLake({ ...lake, network: 'mainnet', datasets });
      expect(await decoded()).toBe(before);
      // The windows the refused commit left fetched commit now, into the table made again.
      expect(await work('derived-w3')).toMatchObject({ windowsFailed: 0 });
      expect(await decoded()).toBe(before);

      await ref(['DROP TABLE ref._rejects']);
      const queued = await enqueueJob(job, doc, lake);
      expect(queued.voided?.map((v) => v.dataset)).toEqual(['_rejects']);
      expect(await work('derived-w4')).toMatchObject({ windowsFailed: 0 });
      expect(await ref(['SELECT count(*) AS n FROM ref._rejects'])).toEqual([{ n: 0n }]);
    }, 180_000);

    it("another writer's commit between the committer's merges and its catalog transaction is kept: the batch is merged again from the new rows", async () => {
      expect(days, 'the lake of the tests before').toBeDefined();
      const address = chain.addrLower(A_BUSY0 + 4);
      const doc = jobDoc('raced', [address]);
      await enqueueJob(parseJob(doc, 'raced', process.env), doc, { catalog: db.url, store });
      let before: Rows | undefined;
      let victim = '';
      const seen: string[] = [];
      const report = await runWorker({
        catalog: db.url,
        store,
        id: 'raced-w1',
        untilIdle: true,
        pollMs: 50,
        log: { log: (_level, event) => void seen.push(event) },
        // The reference commits once the batch's partitions are merged and written, before the commit's transaction:
        // rows inlined into every day, a file of its own, and an inlined delete of a row the run does not fetch.
        merged: async () => {
          if (before) return;
          const [row] = await withRef([
            `SELECT min(transaction_hash) AS h FROM ref.transactions WHERE _run_id <> 'reference' AND sender IS DISTINCT FROM '${address}' AND receiver IS DISTINCT FROM '${address}'`,
          ]);
          victim = String(row!.h);
          await withRef([
            INSERT + days.map((d, i) => inserted(`0xref-raced-${i}`, d, 10 + i)).join(', '),
            `DELETE FROM ref.transactions WHERE transaction_hash = '${victim}'`,
          ]);
          await withRef([INSERT + inserted('0xref-raced-file', days[0]!, 20)], { inlining: 0 });
          before = await refRows();
        },
      });
      expect(report.windowsFailed).toBe(0);
      expect(report.windowsCommitted).toBeGreaterThan(0);
      const after = await refRows();
      const hashes = after.map((r) => String(r.transaction_hash));
      expect(new Set(hashes).size).toBe(hashes.length);
      // Every row the lake held after the reference's commits is there, the deleted one is not, and the run added rows.
      expect(hashes).toEqual(expect.arrayContaining(before!.map((r) => String(r.transaction_hash))));
      expect(hashes.filter((h) => h.startsWith('0xref-raced'))).toHaveLength(days.length + 1);
      expect(hashes).not.toContain(victim);
      expect(after.length).toBeGreaterThan(before!.length);
      expect(plain(await chainlakeRows())).toEqual(plain(after));
      expect(seen).toContain('commit.lake_changed');
    }, 180_000);

    it('a writer that commits at every attempt stops the committer with CHAINLAKE_LAKE_CHANGED: the windows stay fetched, the next commit lands them', async () => {
      const address = chain.addrLower(A_BUSY0 + 5);
      const doc = jobDoc('raced-always', [address]);
      const { runId } = await enqueueJob(parseJob(doc, 'raced-always', process.env), doc, { catalog: db.url, store });
      let attempts = 0;
      let before: Rows = [];
      const failed = await runWorker({
        catalog: db.url,
        store,
        id: 'raced-always-w1',
        untilIdle: true,
        pollMs: 50,
        merged: async () => {
          await withRef([INSERT + inserted(`0xref-always-${attempts++}`, days[0]!, 30)]);
          before = await refRows();
        },
      }).catch((e: unknown) => e);
      expect(chainlakeCodeOf(failed)).toBe('CHAINLAKE_LAKE_CHANGED');
      expect((failed as Error).message).toMatch(/at each of 3 attempts: chainlake did not commit/);
      expect(attempts).toBe(3);
      expect(plain(await refRows())).toEqual(plain(before));
      const c = await db.connect();
      try {
        const statuses = (await c.query(`SELECT DISTINCT status FROM chainlake.windows WHERE run_id = $1`, [runId])).rows.map(
          (r: { status: string }) => r.status,
        );
        expect(statuses).toEqual(['fetched']);
      } finally {
        await c.end();
      }
      const report = await runWorker({ catalog: db.url, store, id: 'raced-always-w2', untilIdle: true, pollMs: 50 });
      expect(report.windowsCommitted).toBeGreaterThan(0);
      const after = (await refRows()).map((r) => String(r.transaction_hash));
      expect(after).toEqual(expect.arrayContaining(before.map((r) => String(r.transaction_hash))));
      expect(after.length).toBeGreaterThan(before.length);
    }, 180_000);

    /**
     * compact --catalog on days holding rows the reference inlined, the reference running `call` once the compaction's
     * partitions are merged and written, before its catalog transaction: the merge is done again from the new rows.
     * Returns the changes of the reference's snapshot (the compaction's is the newest).
     */
    async function compactRaced(tag: string, call: string, setup: string[] = []): Promise<string> {
      await withRef([INSERT + days.map((d, i) => inserted(`0xref-${tag}-${i}`, d, 40 + i)).join(', ')]);
      for (const statement of setup) await withRef([statement], { inlining: 0 });
      let reached = 0;
      let before: Rows = [];
      onTestHook(async (step) => {
        if (step !== 'lake-files' || reached++ > 0) return;
        await withRef([call]);
        before = await refRows();
      });
      try {
        expect((await compactDistributedLake({ catalog: db.url, store })).partitions).toBeGreaterThanOrEqual(days.length);
      } finally {
        onTestHook();
      }
      expect(reached).toBe(2);
      const after = await refRows();
      expect(plain(after)).toEqual(plain(before));
      const hashes = after.map((r) => String(r.transaction_hash));
      expect(new Set(hashes).size).toBe(hashes.length);
      expect(hashes.filter((h) => h.startsWith(`0xref-${tag}-`))).toHaveLength(days.length);
      expect(plain(await chainlakeRows())).toEqual(plain(after));
      const c = await db.connect();
      try {
        const last = await c.query(`SELECT changes_made FROM ducklake.ducklake_snapshot_changes ORDER BY snapshot_id DESC LIMIT 2`);
        return String(last.rows[1]!.changes_made);
      } finally {
        await c.end();
      }
    }

    it('compact --catalog merges again when the reference flushes its inlined rows meanwhile (inline_flush): nothing lost, nothing doubled', async () => {
      expect(await compactRaced('flush', "CALL ducklake_flush_inlined_data('ref')")).toMatch(/(^|,)inline_flush:\d+(,|$)/);
    }, 180_000);

    it('compact --catalog merges again when the reference merges adjacent files meanwhile (merge_adjacent): nothing lost, nothing doubled', async () => {
      const files = days.map((d, i) => INSERT + inserted(`0xref-file-adjacent-${i}`, d, 60 + i));
      expect(await compactRaced('adjacent', "CALL ducklake_merge_adjacent_files('ref')", files)).toMatch(/(^|,)merge_adjacent:\d+(,|$)/);
    }, 180_000);

    it('compact --catalog that another writer beats at every attempt fails with CHAINLAKE_LAKE_CHANGED, its hint saying nothing was committed; the next compact compacts', async () => {
      days ??= (await withRef(['SELECT DISTINCT CAST(block_date AS VARCHAR) AS d FROM ref.transactions ORDER BY 1'])).map((r) => String(r.d));
      await withRef([INSERT + days.map((d, i) => inserted(`0xref-beaten-${i}`, d, 70 + i)).join(', ')]);
      let attempts = 0;
      let before: Rows = [];
      // Each attempt's partitions merged and written, the other writer commits a row before its catalog transaction.
      onTestHook(async (step) => {
        if (step !== 'lake-files') return;
        await withRef([INSERT + inserted(`0xref-beaten-at-${attempts++}`, days[0]!, 80)]);
        before = await refRows();
      });
      const failed = await compactDistributedLake({ catalog: db.url, store })
        .then(
          () => undefined,
          (e: unknown) => e as Error & { hint?: string },
        )
        .finally(() => onTestHook());
      expect(chainlakeCodeOf(failed)).toBe('CHAINLAKE_LAKE_CHANGED');
      expect(failed?.message).toMatch(/at each of 3 attempts: chainlake did not commit/);
      expect(failed?.hint).toBe(
        'run again once the other writer is idle: nothing of this command was committed (its tables are as they were); running it again reads the lake anew',
      );
      expect(attempts).toBe(3);
      // Nothing of the compaction landed, nothing of the other writer's was undone.
      expect(plain(await refRows())).toEqual(plain(before));
      expect((await compactDistributedLake({ catalog: db.url, store })).partitions).toBeGreaterThanOrEqual(days.length);
      const after = await refRows();
      expect(plain(after)).toEqual(plain(before));
      expect(plain(await chainlakeRows())).toEqual(plain(after));
    }, 180_000);

    describe('another writer changes the columns of a table chainlake writes (test/load/shared-schema.test.ts on one machine)', () => {
      let lake: { catalog: string; store: string };
      const ref = (statements: string[]) => withReference(lake.catalog, statements);
      const rows = () => ref(['SELECT * FROM ref.transactions ORDER BY ALL']);
      const snapshot = async () => Number((await ref(['SELECT max(snapshot_id) AS s FROM ref.snapshots()']))[0]!.s);
      /** Each row without what a fetch of it again changes, by key. */
      const byKey = (list: Rows) =>
        new Map(list.map((r) => [String(r.transaction_hash), json([{ ...r, _run_id: null, _ingested_at: null, confirmations: null }])]));

      it('refuses a column renamed, before anything is written; the statement its hint names undoes it, and the fetched windows then commit', async () => {
        lake = { catalog: (await pg.database()).url, store: path.join(tmp.dir, 'store-schema') };
        await distributedRun('schema-one', ADDRESSES.slice(0, 1), lake);
        await ref(['ALTER TABLE ref.transactions RENAME COLUMN nonce TO tx_nonce']);
        const [before, at] = [await rows(), await snapshot()];

        const doc = jobDoc('schema-two', ADDRESSES.slice(0, 2));
        await enqueueJob(parseJob(doc, 'schema-two', process.env), doc, lake);
        const failed = await runWorker({ ...lake, id: 'schema-two-w', account: 'w1', untilIdle: true, pollMs: 50 }).then(
          () => undefined,
          (e: unknown) => e as { code?: string; message: string; hint?: string },
        );
        expect(failed?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
        expect(failed?.message).toMatch(/column nonce of the lake's table transactions was renamed to tx_nonce by another DuckLake writer \(snapshot \d+\)/);
        expect(failed?.hint).toMatch(/ALTER TABLE "transactions" RENAME COLUMN "tx_nonce" TO "nonce"$/);
        await expect(compactDistributedLake(lake)).rejects.toMatchObject({ code: 'CHAINLAKE_SCHEMA_CHANGED' });
        expect(await snapshot()).toBe(at);
        expect(plain(await rows())).toEqual(plain(before));

        await ref([failed!.hint!.match(/ALTER TABLE .*$/)![0]]);
        const report = await runWorker({ ...lake, id: 'schema-two-w2', account: 'w1', untilIdle: true, pollMs: 50 });
        expect(report.windowsCommitted).toBeGreaterThan(0);
        const after = byKey(await rows());
        const renamedBack = byKey(before.map(({ tx_nonce, ...r }) => ({ ...r, nonce: tx_nonce })));
        expect(after.size).toBeGreaterThan(renamedBack.size);
        for (const [key, row] of renamedBack) expect(JSON.parse(after.get(key)!), key).toEqual(JSON.parse(row));
      }, 180_000);

      it("keeps a column another writer added: its values survive the next commit, chainlake's new rows read NULL", async () => {
        expect(lake, 'the lake of the test before').toBeDefined();
        const [first] = await ref(['SELECT transaction_hash FROM ref.transactions ORDER BY ALL LIMIT 1']);
        await ref([
          'ALTER TABLE ref.transactions ADD COLUMN note VARCHAR',
          `UPDATE ref.transactions SET note = 'checked' WHERE transaction_hash = '${String(first!.transaction_hash)}'`,
        ]);
        const before = byKey(await rows());
        expect(before.get(String(first!.transaction_hash))).toContain('"note":"checked"');
        await distributedRun('schema-three', ADDRESSES, lake);
        const list = await rows();
        const after = byKey(list);
        expect(after.size).toBeGreaterThan(before.size);
        for (const [key, row] of before) expect(after.get(key), key).toBe(row);
        for (const r of list) if (!before.has(String(r.transaction_hash))) expect(r.note).toBeNull();
      }, 180_000);

      it('refuses a column renamed and its name given to another (another field id); the names given back, the windows commit', async () => {
        expect(lake, 'the lake of the tests before').toBeDefined();
        await ref(['ALTER TABLE ref.transactions RENAME COLUMN nonce TO tx_nonce', 'ALTER TABLE ref.transactions ADD COLUMN nonce BIGINT']);
        const [before, at] = [await rows(), await snapshot()];
        const doc = jobDoc('schema-four', ADDRESSES);
        await enqueueJob(parseJob(doc, 'schema-four', process.env), doc, lake);
        const failed = await runWorker({ ...lake, id: 'schema-four-w', account: 'w1', untilIdle: true, pollMs: 50 }).then(
          () => undefined,
          (e: unknown) => e as { code?: string; message: string; hint?: string },
        );
        expect(failed?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
        expect(failed?.message).toMatch(
          /column nonce of the lake's table transactions is not the column chainlake wrote: another DuckLake writer renamed that one to tx_nonce/,
        );
        expect(await snapshot()).toBe(at);
        expect(plain(await rows())).toEqual(plain(before));

        await ref(['USE ref', ...failed!.hint!.match(/ALTER TABLE .*$/)![0].split('; ')]);
        const report = await runWorker({ ...lake, id: 'schema-four-w2', account: 'w1', untilIdle: true, pollMs: 50 });
        expect(report.windowsCommitted).toBeGreaterThan(0);
        // Every row keeps chainlake's nonce under its name; the other writer's column (renamed nonce_added) stays NULL.
        const after = byKey(await rows());
        const givenBack = byKey(before.map(({ tx_nonce, nonce, ...r }) => ({ ...r, nonce: tx_nonce, nonce_added: nonce })));
        for (const [key, row] of givenBack) expect(JSON.parse(after.get(key)!), key).toEqual(JSON.parse(row));
      }, 180_000);
    });
  },
);
