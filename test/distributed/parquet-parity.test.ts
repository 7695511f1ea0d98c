import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogDb } from '../../src/ducklake/catalog-db.js';
import { openCatalog } from '../../src/distributed/control-plane.js';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { openDistributedLake } from '../../src/distributed/read.js';
import { runWorker } from '../../src/distributed/worker.js';
import { loadJobDocument } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { openCatalogFile, openReference, referenceMissing } from '../ducklake/helpers.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { tempDir } from '../helpers/lake.js';
import { distributedRows, expectSameFileOptions, singleMachineRows, VOLATILE } from './helpers.js';

/**
 * The statistics the catalog records for each current file, by table, partition folder and column name, without
 * the volatile columns' and the sizes (which follow the volatile values).
 */
async function fileStats(catalog: CatalogDb): Promise<Map<string, string[]>> {
  const rows = await catalog.query(
    `SELECT t.table_name, d.path, c.column_name, s.min_value, s.max_value, s.null_count, s.contains_nan
     FROM ducklake_file_column_stats s
     JOIN ducklake_data_file d ON d.data_file_id = s.data_file_id AND d.end_snapshot IS NULL
     JOIN ducklake_table t ON t.table_id = d.table_id AND t.end_snapshot IS NULL
     JOIN ducklake_column c ON c.table_id = s.table_id AND c.column_id = s.column_id AND c.end_snapshot IS NULL
     ORDER BY t.table_name, d.path, c.column_name`,
  );
  const out = new Map<string, string[]>();
  for (const r of rows) {
    if (VOLATILE.has(String(r.column_name))) continue;
    const key = `${String(r.table_name)}/${path.dirname(String(r.path))}`;
    out.set(key, [
      ...(out.get(key) ?? []),
      `${String(r.column_name)} ${String(r.min_value)}..${String(r.max_value)} nulls ${String(r.null_count)} nan ${String(r.contains_nan)}`,
    ]);
  }
  return out;
}

let pg: TestPostgres;
/** The two lakes of the first test, for the reference extension's reading of them. */
let lakes: { single: string; catalog: string; expected: Awaited<ReturnType<typeof singleMachineRows>> } | undefined;
let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeAll(async () => {
  pg = await startPostgres();
  process.env.PGPASSWORD = pg.password;
  tmp = await tempDir('chainlake-parity-');
}, 120_000);

afterAll(async () => {
  await pg?.stop();
  await tmp?.cleanup();
});

describe('one lake-file writer for both modes', () => {
  it('the demo job on one machine and on three workers: the same rows, and every partition file written with the same Parquet options', async () => {
    const { job, doc } = await loadJobDocument(path.resolve('jobs/demo.json'), process.env);
    const lake = path.join(tmp.dir, 'single');
    await runJob({ ...job, lake: { ...job.lake, dir: lake } });
    const expected = await singleMachineRows(lake);
    expect(expected.size).toBeGreaterThanOrEqual(18);

    const db = await pg.database();
    const store = path.join(tmp.dir, 'store');
    await enqueueJob(job, doc, { catalog: db.url, store });
    // An account each: workers of one account take turns, these fetch side by side.
    const reports = await Promise.all(
      ['p1', 'p2', 'p3'].map((id) =>
        runWorker({ catalog: db.url, store, id, account: id, untilIdle: true, pollMs: 100, leaseSeconds: 30, commitRows: 20_000 }),
      ),
    );
    expect(reports.filter((r) => r.windowsFetched > 0).length, 'windows fetched by each worker').toBeGreaterThanOrEqual(2);
    expect(reports.reduce((n, r) => n + r.windowsFailed, 0)).toBe(0);
    lakes = { single: lake, catalog: db.url, expected };

    // Row for row.
    const dist = await openDistributedLake({ catalog: db.url });
    try {
      for (const [name, want] of expected) {
        if (!dist.tables.includes(name)) {
          expect({ name, rows: want.rows }).toEqual({ name, rows: 0 });
          continue;
        }
        expect({ name, ...(await distributedRows(dist.conn, name, want.columns)) }).toEqual({ name, rows: want.rows, digest: want.digest });
      }
    } finally {
      dist.close();
    }

    // File option for file option, partition by partition.
    const { singleFiles, mine } = await expectSameFileOptions(lake, db.url);
    expect(singleFiles.size).toBeGreaterThan(50);
    expect([...mine.values()].some((p) => p.columns.some((c) => / DELTA_BINARY_PACKED /.test(c)))).toBe(true);
    // The statistics the catalog records, taken the same way from the same rows.
    const single = await openCatalogFile(path.join(lake, 'catalog.duckdb'), { readOnly: true });
    const singleStats = await fileStats(single.catalog).finally(() => single.close());
    const cat = await openCatalog(db.url);
    const distStats = await fileStats(cat.catalog).finally(() => cat.client.end());
    expect(singleStats.size).toBe(singleFiles.size);
    for (const [key, stats] of singleStats) expect({ key, stats: distStats.get(key) }).toEqual({ key, stats });
  }, 300_000);

  const missing = referenceMissing();
  it.skipIf(missing !== null)(
    `the reference ducklake extension reads both lakes with the same rows as chainlake${missing ? ` (${missing})` : ''}`,
    async () => {
      expect(lakes, 'the lakes of the test before').toBeDefined();
      const { single, catalog, expected } = lakes!;
      for (const source of [path.join(single, 'catalog.duckdb'), catalog]) {
        const ref = await openReference(source);
        try {
          const tables = ((await ref.conn.runAndReadAll(`SELECT table_name FROM duckdb_tables() WHERE database_name = 'ref'`)).getRowsJS() as [string][]).map(
            ([t]) => t,
          );
          for (const [name, want] of expected) {
            if (!tables.includes(name)) {
              expect({ source, name, rows: want.rows }).toEqual({ source, name, rows: 0 });
              continue;
            }
            expect({ source, name, ...(await distributedRows(ref.conn, name, want.columns)) }).toEqual({ source, name, rows: want.rows, digest: want.digest });
          }
        } finally {
          ref.close();
        }
      }
    },
    120_000,
  );
});
