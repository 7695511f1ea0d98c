// What test/load/shared-schema.test.ts and shared-schema-drops.test.ts share: a simulator, a temp folder, the jobs
// they run, lakes copied from one built once per file, and the reference DuckDB's reads of a lake.
import { existsSync } from 'node:fs';
import { cp } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { LakePaths } from '../../src/load/paths.js';
import { openLakeReader } from '../../src/load/read/reader.js';
import { parseJob } from '../../src/pipeline/job.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { REFERENCE_DIR, withReference } from '../ducklake/helpers.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

export const HAS_REF = existsSync(path.join(REFERENCE_DIR, 'ducklake.duckdb_extension'));

export type Rows = Record<string, unknown>[];
export const json = (rows: Rows) => JSON.stringify(rows, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
/** Columns a fetch of the same row again changes (when, by which run, confirmations since). */
const VOLATILE = ['_run_id', '_ingested_at', 'confirmations'];
/** Each row without the volatile columns, by key. */
export const byKey = (rows: Rows, key = 'transaction_hash') =>
  new Map(rows.map((r) => [String(r[key]), json([Object.fromEntries(Object.entries(r).filter(([c]) => !VOLATILE.includes(c)))])]));

export const withRef = (lake: string, statements: string[], opts: { inlining?: number } = {}): Promise<Rows> =>
  withReference(path.join(lake, 'catalog.duckdb'), statements, { ...opts, as: 'lake' });
export const refRows = (lake: string, table = 'transactions') => withRef(lake, [`SELECT * FROM lake.${table} ORDER BY ALL`]);
export const snapshotOf = async (lake: string) => Number((await queryCatalog(lake, 'SELECT max(snapshot_id) AS s FROM ducklake_snapshot'))[0]!.s);
/** The ledger's marks of transactions: how many, and the highest. */
export const marksOf = (lake: string) => queryCatalog(lake, `SELECT count(*) AS n, max(block) AS block FROM watermarks WHERE dataset = 'transactions'`);

export async function chainlakeRows(lake: string): Promise<Rows> {
  const reader = await openLakeReader(new LakePaths(lake));
  try {
    return (await reader.conn.runAndReadAll('SELECT * FROM transactions ORDER BY ALL')).getRowObjectsJS() as Rows;
  } finally {
    reader.close();
  }
}

export interface SharedSchemaLakes {
  /** The file's simulator (seed 5), its temp folder and the three addresses its jobs export. */
  readonly sim: RunningSimulator;
  readonly dir: string;
  readonly addresses: string[];
  /** The first `count` addresses' transactions; `incremental`, as a nightly job: from the ledger's marks. */
  job(lake: string, count: number, opts?: { incremental?: boolean }): ReturnType<typeof parseJob>;
  /**
   * A copy of `from` at `name`, taken in as a lake of its own: a chainlake reader points the copy's catalog at the
   * copy's files (until then the reference reads and writes the files where the original's catalog says).
   */
  copyOf(from: string, name: string): Promise<string>;
  /**
   * A copy at `name` of the lake `make` builds at `base` (a folder of the temp folder): the run is made once for the
   * file, and each test changes a copy of its lake.
   */
  copyOfBuilt(base: string, make: (lake: string) => Promise<void>, name: string): Promise<string>;
}

/** The file's simulator and temp folder, started before its tests and closed after them. */
export function sharedSchemaLakes(): SharedSchemaLakes {
  let sim: RunningSimulator | undefined;
  let dir: string | undefined;
  let cleanup: (() => Promise<void>) | undefined;
  let addresses: string[] = [];
  const built = new Map<string, Promise<string>>();
  beforeAll(async () => {
    if (!HAS_REF) return;
    sim = await startSimulator({ seed: 5 });
    ({ dir, cleanup } = await tempDir('chainlake-shared-schema-'));
    addresses = sim.examples.addresses.slice(0, 3);
  });
  afterAll(async () => {
    await sim?.close();
    await cleanup?.();
  });
  const lakes: SharedSchemaLakes = {
    get sim() {
      return sim!;
    },
    get dir() {
      return dir!;
    },
    get addresses() {
      return addresses;
    },
    job: (lake, count, opts = {}) =>
      parseJob(
        {
          name: opts.incremental ? 'nightly' : 'schema',
          target: 'simulator',
          lake,
          concurrency: 4,
          ...(opts.incremental ? { range: { incremental: true } } : {}),
          datasets: { transactions: { addresses: addresses.slice(0, count) } },
        },
        'shared-schema-test',
        process.env,
      ),
    async copyOf(from, name) {
      const lake = path.join(dir!, name);
      await cp(from, lake, { recursive: true });
      (await openLakeReader(new LakePaths(lake))).close();
      return lake;
    },
    async copyOfBuilt(base, make, name) {
      let made = built.get(base);
      if (!made) {
        const lake = path.join(dir!, base);
        made = make(lake).then(() => lake);
        built.set(base, made);
      }
      return lakes.copyOf(await made, name);
    },
  };
  return lakes;
}
