// `chainlake compact --catalog`: a distributed lake's partitions of several files, deletes or rows inlined into the
// catalog (written by the reference `ducklake` extension, another writer of the lake) are rewritten by the
// committer's merge as ONE snapshot under the committer lease; the rows read (by chainlake and by the reference) do
// not change, and a compact lake gets no snapshot at all.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { releaseLease, takeLease } from '../../src/distributed/lease.js';
import { openCatalog } from '../../src/distributed/control-plane.js';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { compactDistributedLake } from '../../src/distributed/maintain.js';
import { runWorker } from '../../src/distributed/worker.js';
import { parseJob } from '../../src/pipeline/job.js';
import { A_BUSY0 } from '../../src/simulator/chain.js';
import { chainFor } from '../../src/simulator/index.js';
import { referenceMissing, withReference } from '../ducklake/helpers.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { runCliCapturing } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';
import { chainlakeQuery } from './helpers.js';

type Rows = Record<string, unknown>[];
const plain = (rows: Rows) => rows.map((r) => JSON.stringify(r, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));

const chain = chainFor(1, 'small', 'mainnet');
const doc = {
  name: 'compact',
  network: 'mainnet',
  target: 'simulator',
  simulator: { seed: 1, scale: 'small' },
  datasets: { transactions: { addresses: [chain.addrLower(A_BUSY0 + 1)] } },
};
const INSERT = 'INSERT INTO ref.transactions (transaction_hash, block_number, transaction_index, network, block_date, _run_id, _ingested_at) VALUES ';
const inserted = (hash: string, day: string, block: number) =>
  `('${hash}', ${block}, 0, 'mainnet', DATE '${day}', 'reference', TIMESTAMPTZ '2026-01-01 00:00:00+00')`;
const victim = (day: string) =>
  `DELETE FROM ref.transactions WHERE transaction_hash = (SELECT min(transaction_hash) FROM ref.transactions WHERE block_date = DATE '${day}')`;

const missing = referenceMissing();

describe.skipIf(missing !== null)(`compact --catalog on a distributed lake${missing ? ` (${missing})` : ''}`, () => {
  let pg: TestPostgres;
  let tmp: Awaited<ReturnType<typeof tempDir>>;
  let db: Awaited<ReturnType<TestPostgres['database']>>;
  let store: string;

  const withRef = (statements: string[], opts: { inlining?: number } = {}) => withReference(db.url, statements, opts);
  const refRows = () => withRef(['SELECT * FROM ref.transactions ORDER BY transaction_hash']);
  const chainlakeRows = () => chainlakeQuery(db.url, store, 'SELECT * FROM transactions ORDER BY transaction_hash');
  /** The newest snapshot, and the live data files of transactions per day. */
  async function catalogState(): Promise<{ snapshot: number; files: Map<string, number>; deletes: number; inlined: number }> {
    const { client, catalog } = await openCatalog(db.url);
    try {
      const snapshot = Number((await catalog.query('SELECT max(snapshot_id) AS s FROM ducklake_snapshot'))[0]?.s);
      const files = new Map<string, number>();
      for (const r of await catalog.query(
        `SELECT p.partition_value AS day, count(*) AS n FROM ducklake_data_file d
         JOIN ducklake_table t ON t.table_id = d.table_id AND t.table_name = 'transactions' AND t.end_snapshot IS NULL
         JOIN ducklake_file_partition_value p ON p.data_file_id = d.data_file_id AND p.partition_key_index = 1
         WHERE d.end_snapshot IS NULL GROUP BY 1`,
      ))
        files.set(String(r.day), Number(r.n));
      const deletes = Number((await catalog.query('SELECT count(*) AS n FROM ducklake_delete_file WHERE end_snapshot IS NULL'))[0]?.n);
      let inlined = 0;
      for (const t of await catalog.query('SELECT table_name FROM ducklake_inlined_data_tables')) {
        const exists = await catalog.query(`SELECT to_regclass($1) AS r`, [`ducklake.${String(t.table_name)}`]);
        if (exists[0]?.r === null) continue;
        inlined += Number((await catalog.query(`SELECT count(*) AS n FROM "${String(t.table_name)}" WHERE end_snapshot IS NULL`))[0]?.n);
      }
      return { snapshot, files, deletes, inlined };
    } finally {
      await client.end();
    }
  }

  beforeAll(async () => {
    pg = await startPostgres();
    tmp = await tempDir('chainlake-compact-pg-');
    db = await pg.database();
    store = path.join(tmp.dir, 'store');
    await enqueueJob(parseJob(doc, 'compact', process.env), doc, { catalog: db.url, store });
    const report = await runWorker({ catalog: db.url, store, id: 'w1', account: 'w1', untilIdle: true, pollMs: 50 });
    expect(report.windowsFailed).toBe(0);
  }, 180_000);

  afterAll(async () => {
    await pg?.stop();
    await tmp?.cleanup();
  });

  it('rewrites the partitions another writer changed as one snapshot: same rows for both readers, one file each, then nothing', async () => {
    const days = (await withRef(['SELECT DISTINCT CAST(block_date AS VARCHAR) AS d FROM ref.transactions ORDER BY 1'])).map((r) => String(r.d));
    expect(days.length).toBeGreaterThanOrEqual(4);
    // Inlined into the catalog: a row into a day chainlake wrote and into a day it never wrote, and a delete.
    await withRef([INSERT + [inserted('0xref-a', days[0]!, 1), inserted('0xref-b', '2030-01-01', 2)].join(', '), victim(days[1]!)]);
    // Without inlining: two data files beside chainlake's in one day, and a delete file in another.
    await withRef([INSERT + inserted('0xref-c', days[2]!, 3), INSERT + inserted('0xref-d', days[2]!, 4), victim(days[3]!)], { inlining: 0 });
    const rows = await refRows();
    expect(plain(await chainlakeRows())).toEqual(plain(rows));
    const before = await catalogState();
    expect(before.files.get(days[2]!)).toBe(3);
    expect(before.deletes).toBeGreaterThan(0);
    expect(before.inlined).toBeGreaterThan(0);
    const untouched = days.slice(4).filter((d) => before.files.get(d) === 1);

    // A worker's commit holds the lease: compaction waits its turn and writes nothing.
    const leases = await openCatalog(db.url);
    try {
      expect(await takeLease(leases.client, 'a-worker', 60)).toBe(true);
      await expect(compactDistributedLake({ catalog: db.url, store })).rejects.toThrow(/another committer holds the lake's commit lease/);
      expect((await catalogState()).snapshot).toBe(before.snapshot);
      await releaseLease(leases.client, 'a-worker');
    } finally {
      await leases.client.end();
    }

    const r = await compactDistributedLake({ catalog: db.url, store });
    expect(r.snapshotId).toBe(before.snapshot + 1);
    // The days the reference changed (its inlined-only day included); days of one file and no change are left alone.
    expect(r.partitions).toBe(5);
    expect(r.alreadyCompact).toBe(untouched.length);
    // What it read and wrote, counted as the single machine's compaction counts it: the rows another writer inlined
    // or deleted included, one file per day after (the inlined-only day had none before).
    const targetDays = [...days.slice(0, 4), '2030-01-01'].map((d) => `'${d}'`).join(', ');
    const [counted] = await withRef([`SELECT count(*) AS n FROM ref.transactions WHERE CAST(block_date AS VARCHAR) IN (${targetDays})`]);
    const targetRows = Number(counted?.n);
    expect(targetRows).toBeGreaterThan(4);
    expect(r).toMatchObject({ filesBefore: 6, filesAfter: 5, rowsBefore: targetRows, rowsAfter: targetRows, prunedDirs: 0 });
    expect(r.bytesAfter).toBeGreaterThan(0);
    // Its run in the ledger, with the single machine's status word.
    const run = await chainlakeQuery(
      db.url,
      store,
      `SELECT job, status, report->>'partitions' AS partitions, report->'totals'->>'rows' AS rows FROM runs WHERE run_id = '${r.runId}'`,
    );
    expect(plain(run)).toEqual(plain([{ job: '(compact)', status: 'compact', partitions: '5', rows: String(targetRows) }]));
    const after = await catalogState();
    expect(after.snapshot).toBe(before.snapshot + 1);
    expect([...after.files.values()].every((n) => n === 1)).toBe(true);
    expect(after.files.get('2030-01-01')).toBe(1);
    expect([...after.files.values()].reduce((a, b) => a + b, 0)).toBeLessThan([...before.files.values()].reduce((a, b) => a + b, 0));
    expect(after.deletes).toBe(0);
    expect(after.inlined).toBe(0);
    // The same rows, read by the reference extension and by chainlake.
    expect(plain(await refRows())).toEqual(plain(rows));
    expect(plain(await chainlakeRows())).toEqual(plain(rows));

    // A compact lake: nothing written, not even a snapshot; the CLI says so as it does for a local lake.
    const again = await runCliCapturing(['compact', '--catalog', db.url, '--store', store]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(
      /^the distributed lake .* \(--catalog\): nothing to compact; \d+ partitions already compact \(one file each\), left as they are\n$/,
    );
    expect((await catalogState()).snapshot).toBe(after.snapshot);
  }, 180_000);
});
