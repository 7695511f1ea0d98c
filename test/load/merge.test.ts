import { copyFile, cp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { transactions } from '../../src/datasets/transactions.js';
import { commitRun } from '../../src/load/write/commit-run.js';
import { slicePartitions } from '../../src/load/write/commit.js';
import { openEngine } from '../../src/load/engine.js';
import { rebuildCatalog } from '../../src/load/write/maintenance.js';
import { LakePaths } from '../../src/load/paths.js';
import { openLakeReader } from '../../src/load/read/reader.js';
import { lakeStatus } from '../../src/load/read/status.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { assertClean, lakeContent, listLake, withDuck } from './helpers.js';

/** Idempotent merge by natural key, file layout and compaction, on real runs against the simulator. */
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let addresses: string[];
let full: Awaited<ReturnType<typeof lakeContent>>;
/** The lake of one full run, built once for the file: a test that starts from it works on a copy. */
let fullLake: string;

const job = (lake: string, range: { fromBlock: number; toBlock?: number } = { fromBlock: 0 }) =>
  parseJob({ name: 'merge', target: 'simulator', lake, concurrency: 4, range, datasets: { transactions: { addresses } } }, 'merge-test', process.env);
const run = async (lake: string, range?: { fromBlock: number; toBlock?: number }, mergeSliceRows?: number) => {
  const r = await runJob(job(lake, range), { simulator: sim, mergeSliceRows });
  expect(r.status).toBe('complete');
  return r;
};
const catalogFiles = (lake: string) =>
  queryCatalog(lake, 'SELECT path, rows::BIGINT AS rows, bytes::BIGINT AS bytes FROM files').then((r) =>
    r.map((f) => ({ path: String(f.path), rows: Number(f.rows), bytes: Number(f.bytes) })),
  );

/** The lake holds what one full run gives, one row per key, and nothing else. */
async function expectAsOneFullRun(lake: string): Promise<void> {
  const content = await lakeContent(lake);
  expect(content.transactions!.duplicates).toBe(0);
  expect(content).toEqual(full);
  expect(await assertClean(lake, await catalogFiles(lake))).toEqual([]);
}

beforeAll(async () => {
  sim = await startSimulator({ seed: 5 });
  ({ dir, cleanup } = await tempDir('chainlake-merge-'));
  addresses = sim.examples.addresses.slice(0, 3);
  fullLake = path.join(dir, 'full');
  await run(fullLake);
  full = await lakeContent(fullLake);
  expect(full.transactions!.rows).toBeGreaterThan(100);
});

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

describe('merge by natural key', () => {
  it('overlapping windows and a re-run of every window leave one row per key, merged a few partitions at a time: the same lake as one full run', async () => {
    const lake = path.join(dir, 'overlap');
    const perPartition = await queryCatalog(fullLake, 'SELECT block_date::VARCHAR AS p, count(*)::BIGINT AS n FROM transactions GROUP BY 1 ORDER BY 1');
    const counts = perPartition.map((r) => [String(r.p), Number(r.n)] as const);
    // Two of the largest partitions fit a slice: slices of two or more, and more than two slices over five days.
    const sliceRows = 2 * Math.max(...counts.map(([, n]) => n));
    // Several slices, and slices of more than one partition: both edges of the BETWEEN are exercised.
    const slices = slicePartitions(counts, sliceRows);
    expect(slices.length).toBeGreaterThan(2);
    expect(slices.some((sl) => sl.length > 1)).toBe(true);
    // The second run overlaps the first; the third re-runs every window of both. Each merges in slices: into an
    // empty lake, then over partitions with files and repeated keys and partitions without, then over files and
    // repeated keys in every partition. (The file's other runs merge at once: the default slice holds them whole.)
    const head = (await run(lake, { fromBlock: 0, toBlock: 20_000 }, sliceRows)).head!;
    await run(lake, { fromBlock: 10_000, toBlock: head }, sliceRows);
    await run(lake, { fromBlock: 0, toBlock: head }, sliceRows);
    await expectAsOneFullRun(lake);
  });

  it('a partition file that cannot be read fails the commit, naming it, while another slice is being written; the lake stays as it was', async () => {
    const lake = path.join(dir, 'unreadable');
    await cp(fullLake, lake, { recursive: true });
    const before = await lakeContent(lake);
    const files = (await catalogFiles(lake))
      .map((f) => f.path)
      .filter((f) => f.startsWith('main/transactions/'))
      .sort();
    expect(files.length).toBeGreaterThan(2);
    // The last day: slice 0 is being written when the merge of the slice holding it is started, and fails.
    const broken = path.join(lake, files[files.length - 1]!);
    const bytes = await readFile(broken);
    await writeFile(broken, 'not a parquet file');
    // A slice per partition.
    await expect(runJob(job(lake), { simulator: sim, mergeSliceRows: 1 })).rejects.toThrow(new RegExp(files[files.length - 1]!.replace(/[.=]/g, '\\$&')));
    await writeFile(broken, bytes);
    expect(await lakeContent(lake)).toEqual(before);
  });

  it('slices are runs of whole partitions within the row limit, an oversized partition alone', () => {
    expect(slicePartitions([], 10)).toEqual([]);
    expect(
      slicePartitions(
        [
          ['a', 4],
          ['b', 6],
          ['c', 25],
          ['d', 1],
          ['e', 9],
          ['f', 1],
        ],
        10,
      ),
    ).toEqual([['a', 'b'], ['c'], ['d', 'e'], ['f']]);
  });

  it('many nightly runs over the same partitions keep one sorted ZSTD file per partition', async () => {
    const lake = path.join(dir, 'nightly');
    // The first night is the full run's lake; two more runs over it (each merges over a merged file).
    await cp(fullLake, lake, { recursive: true });
    for (let i = 0; i < 2; i++) await run(lake);
    const files = (await catalogFiles(lake)).map((f) => f.path);
    const partitions = new Set(files.map((f) => path.dirname(f)));
    expect(files.length).toBe(partitions.size);
    expect(files.every((f) => /^ducklake-[0-9a-f-]+\.parquet$/.test(path.basename(f)))).toBe(true);
    // The files of the earlier snapshots stay for time travel: three versions of each partition.
    expect((await listLake(lake)).filter((f) => f.endsWith('.parquet'))).toHaveLength(3 * files.length);
    expect(await lakeContent(lake)).toEqual(full);
    await withDuck(async (q) => {
      for (const f of files) {
        const file = `'${path.join(lake, f)}'`;
        const codecs = await q(`SELECT DISTINCT compression FROM parquet_metadata(${file})`);
        expect(codecs.map((c) => c.compression)).toEqual(['ZSTD']);
        // Rows in file order are sorted by the declaration's sortBy (block number, then index).
        const [unsorted] = await q(
          `SELECT count(*)::BIGINT AS n FROM (
             SELECT block_number, transaction_index, lag(block_number) OVER w AS pb, lag(transaction_index) OVER w AS pi
             FROM read_parquet(${file}, file_row_number = true) WINDOW w AS (ORDER BY file_row_number))
           WHERE pb > block_number OR (pb = block_number AND pi > transaction_index)`,
        );
        expect(Number(unsorted!.n)).toBe(0);
      }
    });
    // Every run's rows replaced the previous ones: the newest run wins each key.
    const [latest] = await queryCatalog(lake, 'SELECT count(DISTINCT _run_id)::BIGINT AS n FROM transactions');
    expect(Number(latest!.n)).toBe(1);
  });

  it('files no snapshot lists are not the lake; a lost catalog is rebuilt from every file on disk: one file, one row per key', async () => {
    const lake = path.join(dir, 'stray');
    await cp(fullLake, lake, { recursive: true });
    const [first] = (await catalogFiles(lake)).map((f) => f.path).filter((f) => f.startsWith('main/transactions/'));
    const partition = path.join(lake, path.dirname(first!));
    // A duplicate copy, and a file from an older schema (no `input` column) with one changed, newer row.
    await copyFile(path.join(lake, first!), path.join(partition, 'copy.parquet'));
    await withDuck((q) =>
      q(
        `COPY (SELECT * EXCLUDE (input, tx_message) REPLACE ('patched' AS _run_id, _ingested_at + INTERVAL 1 DAY AS _ingested_at), 'patched message' AS tx_message
               FROM read_parquet('${path.join(lake, first!)}') ORDER BY block_number LIMIT 1)
         TO '${path.join(partition, 'old-schema.parquet')}' (FORMAT parquet)`,
      ),
    );
    // Readers see the newest snapshot's files only; status names the others.
    const [dup] = await queryCatalog(lake, 'SELECT (count(*) - count(DISTINCT transaction_hash))::BIGINT AS d FROM transactions');
    expect(Number(dup!.d)).toBe(0);
    const paths = new LakePaths(lake);
    const reader = await openLakeReader(paths);
    const before = await lakeStatus(reader.conn, paths).finally(() => reader.close());
    expect(before.strayPartitions).toEqual([expect.objectContaining({ dataset: 'transactions', files: 2 })]);

    await rm(paths.catalog);
    const report = await rebuildCatalog(paths);
    expect(report.partitionsFromDisk).toBeGreaterThan(0);
    const content = await lakeContent(lake);
    expect(content.transactions!.rows).toBe(full.transactions!.rows);
    expect(content.transactions!.duplicates).toBe(0);
    expect(await assertClean(lake, await catalogFiles(lake))).toEqual([]);
    // The newer row won, and the old file's missing column became NULL in it.
    const patched = await queryCatalog(lake, `SELECT tx_message, input FROM transactions WHERE _run_id = 'patched'`);
    expect(patched).toEqual([{ tx_message: 'patched message', input: null }]);
    const types = await queryCatalog(lake, `SELECT column_type FROM (DESCRIBE transactions) WHERE column_name = 'value'`);
    expect(types[0]!.column_type).toBe('DECIMAL(38,0)');
  });

  it('rejects are a per-day log: the runs of one day share one merged file', async () => {
    const lake = path.join(dir, 'rejects');
    const paths = new LakePaths(lake);
    const staging = path.join(lake, '_staging', 'test');
    await mkdir(staging, { recursive: true });
    const rejects = path.join(staging, 'rejects.ndjson');
    const entry = (i: number) => ({ transaction_hash: `0x${String(i).padStart(64, '0')}`, value: 'not-a-number' });
    await writeFile(
      rejects,
      [1, 2]
        .map((i) =>
          JSON.stringify({
            dataset: 'transactions',
            network: 'mainnet',
            window: 'w',
            field: 'value',
            raw_value: '"not-a-number"',
            reason: 'not an integer',
            entry: JSON.stringify(entry(i)),
          }),
        )
        .join('\n') + '\n',
    );
    const engine = await openEngine({ tempDir: path.join(staging, 'tmp') });
    try {
      for (const [runId, batch] of [
        ['run-1', 'batch-0'],
        ['run-2', 'batch-0'],
      ] as const) {
        await commitRun({
          engine,
          paths,
          runId,
          ingestedAt: '2024-05-01T10:00:00.000Z',
          stagingDir: path.join(lake, '_staging', runId, batch),
          network: 'mainnet',
          datasets: [{ def: transactions, stagedFiles: [] }],
          rejectFiles: [rejects],
          windows: [],
          watermarks: [],
          run: () => ({ job: 't', startedAt: '2024-05-01T10:00:00.000Z', finishedAt: '2024-05-01T10:00:01.000Z', status: 'complete', report: {} }),
        });
      }
    } finally {
      engine.close();
    }
    expect((await catalogFiles(lake)).map((f) => path.dirname(f.path))).toEqual(['main/_rejects/network=mainnet/run_date=2024-05-01']);
    const rows = await queryCatalog(lake, `SELECT _run_id, field, reason, entry->>'value' AS v, run_date::VARCHAR AS d FROM _rejects ORDER BY _run_id, entry`);
    expect(rows).toHaveLength(4);
    expect(rows[0]).toEqual({ _run_id: 'run-1', field: 'value', reason: 'not an integer', v: 'not-a-number', d: '2024-05-01' });
  });
});
