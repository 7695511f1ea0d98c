// A lake chainlake writes is shared with other DuckLake writers: a user's DuckDB with the reference `ducklake`
// extension (built for the project's DuckDB in ../shared/ducklake-ref/) inserts and deletes rows (inlined in the
// catalog, its default for small writes, and as Parquet data and delete files), merges, expires and cleans up. chainlake
// then reads exactly what the reference reads, says so in `status`, and commits on top without losing any of it.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeLake } from '../../src/decode/lake.js';
import { resolveDatasets } from '../../src/decode/spec.js';
import { openEngine } from '../../src/load/engine.js';
import { compactLake } from '../../src/load/write/maintenance.js';
import { A_ERC20_0 } from '../../src/simulator/chain.js';
import { chainFor } from '../../src/simulator/index.js';
import { STANDARD_SIGNATURES } from '../../src/simulator/token-events.js';
import { parseAbiItem, toEventSelector, type AbiEvent } from 'viem';
import { LakePaths } from '../../src/load/paths.js';
import { openLakeReader } from '../../src/load/read/reader.js';
import { lakeStatus } from '../../src/load/read/status.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { fetchAllPages } from '../helpers/api.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { REFERENCE_DIR, withReference } from '../ducklake/helpers.js';

const HAS_REF = existsSync(path.join(REFERENCE_DIR, 'ducklake.duckdb_extension'));
if (!HAS_REF) console.warn(`shared-lake tests skipped: the reference ducklake extension is not at ${REFERENCE_DIR} (see its README)`);

type Rows = Record<string, unknown>[];
const json = (rows: Rows) => JSON.stringify(rows, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));

/** Statements of another DuckLake writer (the reference extension), the lake attached as `lake`; the last one's rows. */
const withRef = (lake: string, statements: string[], opts: { inlining?: number } = {}): Promise<Rows> =>
  withReference(path.join(lake, 'catalog.duckdb'), statements, { ...opts, as: 'lake' });

/** Every row of transactions, ordered by key, as the reference reads them. */
const refRows = (lake: string) => withRef(lake, ['SELECT * FROM lake.transactions ORDER BY transaction_hash']);

/** Every row of transactions, ordered by key, as `chainlake query` reads them. */
async function chainlakeRows(lake: string): Promise<Rows> {
  const reader = await openLakeReader(new LakePaths(lake));
  try {
    return (await reader.conn.runAndReadAll('SELECT * FROM transactions ORDER BY transaction_hash')).getRowObjectsJS() as Rows;
  } finally {
    reader.close();
  }
}

let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let lake: string;
let addresses: string[];

const job = (target: string, count: number) =>
  parseJob(
    { name: 'shared', target: 'simulator', lake: target, concurrency: 4, datasets: { transactions: { addresses: addresses.slice(0, count) } } },
    'shared-lake-test',
    process.env,
  );
const run = async (target: string, count: number) => expect((await runJob(job(target, count), { simulator: sim })).status).toBe('complete');

/** Rows the reference inserts: keys no API returns, so only the reference's writes can explain them. */
const inserted = (hash: string, day: string, block: number) =>
  `('${hash}', ${block}, 0, 'mainnet', DATE '${day}', 'reference', TIMESTAMPTZ '2026-01-01 00:00:00+00')`;
const INSERT = 'INSERT INTO lake.transactions (transaction_hash, block_number, transaction_index, network, block_date, _run_id, _ingested_at) VALUES ';

beforeAll(async () => {
  if (!HAS_REF) return;
  sim = await startSimulator({ seed: 5 });
  ({ dir, cleanup } = await tempDir('chainlake-shared-lake-'));
  addresses = sim.examples.addresses.slice(0, 3);
  lake = path.join(dir, 'lake');
  await run(lake, 1);
});

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

describe.skipIf(!HAS_REF)('a lake shared with the reference DuckLake extension (single machine)', () => {
  let days: string[];
  let before: Rows;

  it("reads the reference's inlined rows and deletes, its data and delete files, after its merge, expiry and cleanup", async () => {
    days = (await withRef(lake, ['SELECT DISTINCT CAST(block_date AS VARCHAR) AS d FROM lake.transactions ORDER BY 1'])).map((r) => String(r.d));
    expect(days.length).toBeGreaterThanOrEqual(4);
    const victim = (day: string) =>
      `DELETE FROM lake.transactions WHERE transaction_hash = (SELECT min(transaction_hash) FROM lake.transactions WHERE block_date = DATE '${day}')`;
    // Small writes: inlined into the catalog (the reference's default), an insert into a day chainlake wrote and
    // into a day it never wrote, and a delete of a row of one of chainlake's files.
    await withRef(lake, [INSERT + [inserted('0xref-a', days[0]!, 1), inserted('0xref-b', '2030-01-01', 2)].join(', '), victim(days[1]!)]);
    // The same without inlining: a data file beside chainlake's in a partition, and a delete file.
    await withRef(lake, [INSERT + inserted('0xref-c', days[2]!, 3), victim(days[3]!)], { inlining: 0 });
    const changes = (await withRef(lake, ['SELECT changes FROM lake.snapshots() ORDER BY snapshot_id DESC LIMIT 4'])).map((r) =>
      json([{ changes: r.changes }]),
    );
    expect(changes.join(' ')).toMatch(/inlined_insert.*|inlined_delete/);
    // Its maintenance: the new file merged with chainlake's, every earlier snapshot expired, their files deleted.
    await withRef(lake, [
      "CALL ducklake_merge_adjacent_files('lake')",
      "CALL ducklake_expire_snapshots('lake', older_than => now() + INTERVAL 1 HOUR)",
      "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)",
    ]);

    before = await refRows(lake);
    expect(before.map((r) => r.transaction_hash)).toEqual(expect.arrayContaining(['0xref-a', '0xref-b', '0xref-c']));
    const mine = await chainlakeRows(lake);
    expect(mine.length).toBe(before.length);
    expect(json(mine)).toBe(json(before));

    // status counts what a reader reads, and names no file that is gone.
    const reader = await openLakeReader(new LakePaths(lake));
    try {
      const status = await lakeStatus(reader.conn, new LakePaths(lake));
      const tx = status.datasets.find((d) => d.dataset === 'transactions' && d.network === 'mainnet');
      expect(tx?.rows).toBe(before.length);
      // The partitions of its files (a day only inlined rows hold has none).
      expect(tx?.partitions).toBe(days.length);
      expect(status.missingFiles).toEqual([]);
    } finally {
      reader.close();
    }
  });

  it("commits on top of the reference's writes without losing them: both read the same rows after", async () => {
    // The rows the larger job fetches: its addresses' transactions, as the API lists them.
    const listed = await Promise.all(addresses.map((a) => fetchAllPages(`${sim.urls.mainnet}/v1/accounts/${a}/transactions`, sim.apiKey)));
    const fetched = listed.flat().map((r) => String(r.transaction_hash).toLowerCase());

    await run(lake, 3);
    const after = await refRows(lake);
    // Every row the lake held is still there (the reference's included), plus what the run fetched; one row per key.
    const expected = [...new Set([...before.map((r) => String(r.transaction_hash)), ...fetched])].sort();
    expect(after.map((r) => String(r.transaction_hash))).toEqual(expected);
    for (const hash of ['0xref-a', '0xref-b', '0xref-c']) {
      const row = after.find((r) => r.transaction_hash === hash)!;
      expect(row._run_id, hash).toBe('reference');
    }
    expect(json(await chainlakeRows(lake))).toBe(json(after));
    // The catalog's own views, as a plain DuckDB without the extension reads them, are of the newest snapshot too.
    expect(json(await queryCatalog(lake, 'SELECT * FROM transactions ORDER BY transaction_hash'))).toBe(json(after));
  });

  it('compact writes the rows the reference left in the catalog into files: nothing inlined stays current, the rows stay the same', async () => {
    // One more inlined insert and delete, in a day the run rewrote.
    await withRef(lake, [
      INSERT + inserted('0xref-d', days[1]!, 4),
      `DELETE FROM lake.transactions WHERE transaction_hash = (SELECT min(transaction_hash) FROM lake.transactions WHERE block_date = DATE '${days[1]!}')`,
    ]);
    const before = await refRows(lake);
    const report = await compactLake(new LakePaths(lake));
    expect(report.partitions).toBeGreaterThanOrEqual(2); // the inlined-only day and the day with the inlined delete
    // Counted as the distributed compaction counts: the rows as read (inlined ones in, deleted ones out), one file each.
    expect(report.rowsBefore).toBeGreaterThan(0);
    expect(report.rowsAfter).toBe(report.rowsBefore);
    expect(report.filesAfter).toBe(report.partitions);
    const [snapshot] = await queryCatalog(lake, 'SELECT max(snapshot_id) AS s FROM ducklake_snapshot');
    expect(report.snapshotId).toBe(Number(snapshot?.s));
    const run = await queryCatalog(lake, `SELECT job, status, CAST(report->>'partitions' AS INTEGER) AS p FROM runs WHERE run_id = '${report.runId}'`);
    expect(run).toEqual([{ job: '(compact)', status: 'compact', p: report.partitions }]);
    const names = (await queryCatalog(lake, 'SELECT table_name FROM ducklake_inlined_data_tables')).map((r) => String(r.table_name));
    expect(names.length).toBeGreaterThan(0);
    const current = await queryCatalog(
      lake,
      `SELECT (SELECT count(*) FROM ducklake_delete_file WHERE end_snapshot IS NULL)::BIGINT AS deletes,
              (${names.map((n) => `(SELECT count(*) FROM ${n} WHERE end_snapshot IS NULL)`).join(' + ')})::BIGINT AS inlined`,
    );
    expect(current).toEqual([{ deletes: 0n, inlined: 0n }]);
    expect(json(await refRows(lake))).toBe(json(before));
    expect(json(await chainlakeRows(lake))).toBe(json(before));
  });

  it('compact clears a day another writer emptied, whose current file holds only deleted rows', async () => {
    const day = days[days.length - 1]!;
    // A file of the reference's beside chainlake's, the day's other rows deleted (chainlake's file goes), then its
    // one row (an inlined delete): the day keeps a current file, with no row in it.
    await withRef(lake, [INSERT + inserted('0xref-e', day, 5)], { inlining: 0 });
    await withRef(lake, [`DELETE FROM lake.transactions WHERE block_date = DATE '${day}' AND transaction_hash <> '0xref-e'`]);
    await withRef(lake, [`DELETE FROM lake.transactions WHERE transaction_hash = '0xref-e'`]);
    const dayFiles = (sql: string) =>
      withRef(lake, [
        `SELECT count(*) AS n FROM __ducklake_metadata_lake.ducklake_data_file WHERE end_snapshot IS NULL AND path LIKE '%block_date=${day}/%' ${sql}`,
      ]);
    expect(await dayFiles('')).toEqual([{ n: 1n }]);
    const before = await refRows(lake);
    expect(before.some((r) => String(r.block_date).startsWith(day))).toBe(false);
    const report = await compactLake(new LakePaths(lake));
    expect(report.partitions).toBe(1);
    expect(await dayFiles('')).toEqual([{ n: 0n }]);
    expect(json(await refRows(lake))).toBe(json(before));
    expect(json(await chainlakeRows(lake))).toBe(json(before));
  });
  it("keeps the rows another writer wrote into _rejects and drops those it deleted: compact writes them out, chainlake's reader reads what the reference reads", async () => {
    const rejects = () => withRef(lake, ['SELECT * EXCLUDE (entry), CAST(entry AS VARCHAR) AS entry FROM lake._rejects ORDER BY ALL']);
    const reject = (field: string) =>
      `('transactions', 'reference', '${field}', '"x"', 'checked by hand', '{"k": 1}', 'reference', TIMESTAMPTZ '2026-01-01 00:00:00+00', 'mainnet', DATE '2026-01-01')`;
    await withRef(lake, [
      `INSERT INTO lake._rejects (dataset, "window", field, raw_value, reason, entry, _run_id, _ingested_at, network, run_date) VALUES ${['a', 'b', 'c'].map(reject).join(', ')}`,
    ]);
    await withRef(lake, [`DELETE FROM lake._rejects WHERE field = 'b'`]);
    const before = await rejects();
    expect(before.map((r) => r.field)).toEqual(['a', 'c']);
    const fields = async () => {
      const reader = await openLakeReader(new LakePaths(lake));
      try {
        return (await reader.conn.runAndReadAll('SELECT field FROM _rejects ORDER BY field')).getRowsJS().map((r) => String(r[0]));
      } finally {
        reader.close();
      }
    };
    expect(await fields()).toEqual(['a', 'c']);
    const report = await compactLake(new LakePaths(lake));
    expect(report.partitions).toBeGreaterThanOrEqual(1);
    expect(json(await rejects())).toBe(json(before));
    expect(await fields()).toEqual(['a', 'c']);
    const files = await withRef(lake, [
      `SELECT count(*) AS n FROM __ducklake_metadata_lake.ducklake_data_file f JOIN __ducklake_metadata_lake.ducklake_table t USING (table_id)
       WHERE t.table_name = '_rejects' AND t.end_snapshot IS NULL AND f.end_snapshot IS NULL`,
    ]);
    expect(files).toEqual([{ n: 1n }]);
  });
});

describe.skipIf(!HAS_REF)('decoding logs another DuckLake writer changed (single machine)', () => {
  it('decode reads the logs the reference reads: the logs it deleted (an inlined delete) are not read, the others are decoded', async () => {
    const logsLake = path.join(dir, 'logs');
    const token = chainFor(5, 'small', 'mainnet').addrLower(A_ERC20_0);
    const doc = {
      name: 'logs',
      target: 'simulator',
      lake: logsLake,
      range: { fromBlock: 0, toBlock: 3000 },
      datasets: { event_logs: { contracts: [{ address: token, topics: [toEventSelector(parseAbiItem(STANDARD_SIGNATURES.erc20Transfer) as AbiEvent)] }] } },
    };
    const ran = await runJob(parseJob(doc, 'shared-lake-test', process.env), { simulator: sim });
    expect(ran.errors).toEqual([]);
    const held = async () => Number((await withRef(logsLake, ['SELECT count(*) AS n FROM lake.event_logs']))[0]!.n);
    const all = await held();
    expect(all).toBeGreaterThan(1);
    await withRef(logsLake, ['DELETE FROM lake.event_logs WHERE transaction_hash = (SELECT min(transaction_hash) FROM lake.event_logs)']);
    const kept = await held();
    expect(kept).toBeLessThan(all);
    const paths = new LakePaths(logsLake);
    const staging = paths.staging('decode-shared');
    const engine = await openEngine({ tempDir: path.join(staging, 'tmp') });
    try {
      const datasets = await resolveDatasets({ standard: ['erc20'], contracts: [] }, { engine, paths, network: 'mainnet' });
      const report = await decodeLake({
        engine,
        paths,
        network: 'mainnet',
        datasets,
        runId: 'decode-shared',
        ingestedAt: new Date().toISOString(),
        stagingDir: staging,
      });
      expect(report.logs).toBe(kept);
      expect(report.datasets.reduce((n, d) => n + d.rows, 0)).toBeGreaterThan(0);
    } finally {
      engine.close();
    }
  });
});
