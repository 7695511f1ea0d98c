// `chainlake decode --catalog`: a distributed lake's committed event logs (of a job without a `decode` key)
// decoded later, as `chainlake decode --lake` decodes a local lake's: the same decoded rows, types and rejects,
// committed as one snapshot; decoding again replaces instead of adding; the reference extension reads them. A
// decoding is a run like any other (recorded in the control plane's `runs` as decode --lake records it in the local
// ledger), and it renews its committer lease while it works, so that a decoding slower than its lease still commits
// behind nobody's back.
import path from 'node:path';
import { parseAbiItem, toEventSelector, type AbiEvent } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, openCatalog } from '../../src/distributed/control-plane.js';
import { takeLease } from '../../src/distributed/lease.js';
import { decodeDistributedLake } from '../../src/distributed/decode.js';
import { compactDistributedLake } from '../../src/distributed/maintain.js';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { parseDecodeSpec, resolveDatasets } from '../../src/decode/spec.js';
import { lakeStatus } from '../../src/load/read/status.js';
import { openDistributedLake } from '../../src/distributed/read.js';
import { runWorker } from '../../src/distributed/worker.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { A_ERC20_0, A_ERC721_0 } from '../../src/simulator/chain.js';
import { chainFor } from '../../src/simulator/index.js';
import { A_ODD_ERC20, STANDARD_SIGNATURES } from '../../src/simulator/token-events.js';
import { openReference, referenceMissing, withReference } from '../ducklake/helpers.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { runCliInProcess } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { chainlakeQuery, distributedRows, singleMachineRows } from './helpers.js';

const SEED = 5;
const chain = chainFor(SEED, 'small', 'mainnet');
const A = (i: number): string => chain.addrLower(i);
const T = (sig: string): string => toEventSelector(parseAbiItem(sig) as AbiEvent);
const TRANSFER = T(STANDARD_SIGNATURES.erc20Transfer);
const APPROVAL = T(STANDARD_SIGNATURES.erc20Approval);

/** Event logs of an ERC-20, an odd ERC-20 (short data: rejects) and an ERC-721 (skipped by erc20); no `decode` key. */
function logsDoc(lake: string): Record<string, unknown> {
  const c = (i: number, topics: string[]): { address: string; topics: string[] }[] => topics.map((t) => ({ address: A(i), topics: [t] }));
  return {
    name: 'decode-later',
    target: 'simulator',
    simulator: { seed: SEED, scale: 'small' },
    lake,
    range: { fromBlock: 0, toBlock: 6_000 },
    datasets: {
      event_logs: { contracts: [...c(A_ERC20_0, [TRANSFER, APPROVAL]), ...c(A_ODD_ERC20, [TRANSFER]), ...c(A_ERC721_0, [TRANSFER, APPROVAL])] },
    },
  };
}

const isDecoded = (table: string): boolean => /_events$/.test(table);

/** The CLI in process; its report is what the command wrote to stdout (decode writes there itself). */
async function decodeCli(args: string[]): Promise<{ code: number; report: Record<string, unknown>; stderr: string }> {
  const write = process.stdout.write.bind(process.stdout);
  let out = '';
  process.stdout.write = ((chunk: string | Uint8Array) => {
    out += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    return true;
  }) as typeof process.stdout.write;
  let r;
  try {
    r = await runCliInProcess(['decode', ...args, '--standard', 'erc20', '--format', 'json']);
  } finally {
    process.stdout.write = write;
  }
  const json = out.slice(out.indexOf('{'));
  return { code: r.code ?? -1, report: r.code === 0 ? (JSON.parse(json) as Record<string, unknown>) : {}, stderr: r.stderr };
}

/** A decode report without what differs by run (its id, the files it wrote). */
const comparable = (r: Record<string, unknown>): Record<string, unknown> => {
  const { runId: _r, files: _f, ...rest } = r;
  return rest;
};

let pg: TestPostgres;
let tmp: Awaited<ReturnType<typeof tempDir>>;
/** The distributed lake the first test worked and decoded (the later ones decode it again). */
let worked: { url: string; store: string; decoded: string[] } | undefined;

beforeAll(async () => {
  pg = await startPostgres();
  tmp = await tempDir('chainlake-decode-cmd-');
}, 120_000);

afterAll(async () => {
  await pg?.stop();
  await tmp?.cleanup();
});

async function controlQuery(url: string, sql: string): Promise<Record<string, unknown>[]> {
  const client = await connect(url);
  try {
    return (await client.query(sql)).rows as Record<string, unknown>[];
  } finally {
    await client.end();
  }
}

async function snapshotIds(catalog: string): Promise<number[]> {
  const cat = await openCatalog(catalog);
  try {
    return (await cat.catalog.query(`SELECT snapshot_id FROM ducklake_snapshot ORDER BY 1`)).map((r) => Number(r.snapshot_id));
  } finally {
    await cat.client.end();
  }
}

/** A run's row in the control plane's ledger. */
async function controlRun(
  url: string,
  runId: string,
): Promise<{ job: string; status: string; finished: boolean; report: Record<string, unknown> } | undefined> {
  const client = await connect(url);
  try {
    const r = (await client.query(`SELECT job, status, finished_at, report FROM chainlake.runs WHERE run_id = $1`, [runId])).rows[0];
    return r && { job: String(r.job), status: String(r.status), finished: r.finished_at !== null, report: r.report as Record<string, unknown> };
  } finally {
    await client.end();
  }
}

const erc20 = async () =>
  resolveDatasets(
    parseDecodeSpec({ standard: ['erc20'] }, 'test', (where, problem) => {
      throw new Error(`${where}: ${problem}`);
    }),
    { network: 'mainnet' },
  );

async function decodeRejects(conn: import('@duckdb/node-api').DuckDBConnection): Promise<number> {
  return Number((await conn.runAndReadAll(`SELECT count(*)::INTEGER FROM _rejects WHERE "window" LIKE 'decode/%'`)).getRowsJS()[0]![0]);
}

describe('chainlake decode --catalog', () => {
  it('decodes a distributed lake’s event logs as decode --lake decodes a local lake’s, as one snapshot, and again without adding', async () => {
    // One machine: the job, then decode --lake.
    const single = path.join(tmp.dir, 'single');
    await runJob(parseJob(logsDoc(single), 'decode-later', process.env));
    const local = await decodeCli(['--lake', single]);
    expect(local.stderr).toBe('');
    expect(local.code).toBe(0);
    const expected = await singleMachineRows(single);
    const decoded = [...expected.keys()].filter(isDecoded);
    expect(decoded.length).toBeGreaterThanOrEqual(2);
    expect(decoded.reduce((n, t) => n + expected.get(t)!.rows, 0)).toBeGreaterThan(20);
    const [rejected] = await queryCatalog(single, `SELECT count(*)::INTEGER AS n FROM _rejects WHERE "window" LIKE 'decode/%'`);
    const localRejects = Number(rejected!.n);
    expect(localRejects, 'decode rejects on one machine').toBeGreaterThan(0);
    expect((local.report.skipped as unknown[]).length, 'ERC-721 logs skipped').toBeGreaterThan(0);

    // Distributed: the same job enqueued and worked, then decode --catalog.
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store');
    const doc = logsDoc(path.join(tmp.dir, 'unused'));
    await enqueueJob(parseJob(doc, 'decode-later', process.env), doc, { catalog: db.url, store });
    const work = await runWorker({ catalog: db.url, store, id: 'w1', untilIdle: true, pollMs: 100, leaseSeconds: 60 });
    expect(work.windowsFailed).toBe(0);
    worked = { url: db.url, store, decoded };
    const before = await snapshotIds(db.url);
    const dist = await decodeCli(['--catalog', db.url, '--store', store]);
    expect(dist.stderr).toBe('');
    expect(dist.code).toBe(0);
    // The same report: logs read, rows and days of each dataset, rejects, skipped logs.
    expect(comparable(dist.report)).toEqual(comparable(local.report));
    const after = await snapshotIds(db.url);

    // A run like any other: recorded in the control plane's runs as decode --lake records it in the local ledger, with
    // the same status word, its rows, and the snapshot that committed it; `status --catalog` lists it.
    const rowsOf = (r: Record<string, unknown>) => (r.datasets as { rows: number }[]).reduce((n, d) => n + d.rows, 0);
    const [localRun] = await queryCatalog(
      single,
      `SELECT job, status, CAST(json_extract(report, '$.totals.rows') AS BIGINT) AS rows FROM runs WHERE run_id = '${String(local.report.runId)}'`,
    );
    expect(localRun).toEqual({ job: '(decode)', status: 'complete', rows: BigInt(rowsOf(local.report)) });
    const run = await controlRun(db.url, String(dist.report.runId));
    expect(run).toMatchObject({ job: '(decode)', status: 'complete', finished: true });
    expect(run!.report).toMatchObject({ totals: { rows: rowsOf(dist.report), rejects: localRejects }, snapshot: after.at(-1), network: 'mainnet' });
    const reader = await openDistributedLake({ catalog: db.url, store });
    try {
      const listed = (await lakeStatus(reader.conn, { name: 'lake' })).runs.find((r) => r.run_id === dist.report.runId);
      expect(listed).toMatchObject({ job: '(decode)', status: 'complete', rows: rowsOf(dist.report) });
    } finally {
      reader.close();
    }

    const check = async (): Promise<void> => {
      const lake = await openDistributedLake({ catalog: db.url, store });
      try {
        for (const name of decoded) {
          const want = expected.get(name)!;
          expect({ name, ...(await distributedRows(lake.conn, name, want.columns)) }).toEqual({ name, rows: want.rows, digest: want.digest });
          const types = (rows: Record<string, unknown>[]) => rows.map((r) => `${String(r.column_name)} ${String(r.column_type)}`).sort();
          expect(types((await lake.conn.runAndReadAll(`DESCRIBE "${name}"`)).getRowObjectsJS() as Record<string, unknown>[])).toEqual(
            types(await queryCatalog(single, `DESCRIBE "${name}"`)),
          );
        }
        expect(await decodeRejects(lake.conn)).toBe(localRejects);
      } finally {
        lake.close();
      }
    };
    await check();
    // Declared in the ledger as a local decoding declares them: what compaction and rebuilds read later.
    const declared = await controlQuery(db.url, `SELECT name FROM chainlake.declared_tables ORDER BY name`);
    expect(declared.map((r) => String(r.name))).toEqual(expect.arrayContaining(decoded));
    expect(declared.map((r) => String(r.name)).sort()).toEqual(
      (await queryCatalog(single, `SELECT name FROM declared_tables ORDER BY name`)).map((r) => String(r.name)).sort(),
    );
    // The decoded rows and their rejects are in one snapshot (the ones before it only created their tables).
    const cat = await openCatalog(db.url);
    try {
      const begun = await cat.catalog.query(
        `SELECT DISTINCT d.begin_snapshot FROM ducklake_data_file d JOIN ducklake_table t ON t.table_id = d.table_id AND t.end_snapshot IS NULL
         WHERE (t.table_name LIKE '%\\_events' ESCAPE '\\' OR t.table_name = '_rejects') AND d.end_snapshot IS NULL`,
      );
      expect(begun.map((r) => Number(r.begin_snapshot))).toEqual([after.at(-1)]);
    } finally {
      await cat.client.end();
    }
    expect(after.length).toBeGreaterThan(before.length);

    // Again: the same rows and rejects, replaced in one more snapshot, not added.
    const again = await decodeCli(['--catalog', db.url, '--store', store]);
    expect(again.code).toBe(0);
    expect(comparable(again.report)).toEqual(comparable(local.report));
    expect(await snapshotIds(db.url)).toEqual([...after, after.at(-1)! + 1]);
    await check();

    // The reference ducklake extension reads the decoded tables with the same rows.
    const missing = referenceMissing();
    if (missing === null) {
      const ref = await openReference(db.url);
      try {
        for (const name of decoded) {
          const want = expected.get(name)!;
          expect({ name, ...(await distributedRows(ref.conn, name, want.columns)) }).toEqual({ name, rows: want.rows, digest: want.digest });
        }
      } finally {
        ref.close();
      }
    }
  }, 600_000);

  it.skipIf(referenceMissing() !== null)(
    'compact --catalog rewrites a decoded day another DuckLake writer added a file to, by its declared key',
    async () => {
      const { url, store, decoded } = worked!;
      const table = decoded[0]!;
      // The reference extension adds a data file (no inlining) to one day: a row copied under a new log index.
      await withReference(
        url,
        [`INSERT INTO ref."${table}" SELECT * REPLACE (log_index + 1000000 AS log_index) FROM ref."${table}" ORDER BY transaction_hash, log_index LIMIT 1`],
        { inlining: 0 },
      );
      const rows = await withReference(url, [`SELECT * FROM ref."${table}" ORDER BY ALL`]);
      const r = await compactDistributedLake({ catalog: url, store, datasets: [table] });
      expect(r).toMatchObject({ partitions: 1, filesBefore: 2, filesAfter: 1 });
      expect(r.rowsAfter).toBe(r.rowsBefore);
      const plain = (x: Record<string, unknown>[]) => JSON.stringify(x, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
      expect(plain(await chainlakeQuery(url, store, `SELECT * FROM "${table}" ORDER BY ALL`))).toBe(plain(rows));
    },
    120_000,
  );

  it('renews its lease while it works: a decoding slower than its lease commits once, and no other committer takes the lease meanwhile', async () => {
    const { url, store } = worked!;
    const datasets = await erc20();
    const before = await snapshotIds(url);
    const other = await connect(url);
    let taken: boolean | undefined;
    try {
      const r = await decodeDistributedLake({
        catalog: url,
        store,
        network: 'mainnet',
        datasets,
        leaseSeconds: 2,
        // Under the lease, the lake read: wait until the lease as first taken has run out (bounded), then another worker asks for it.
        afterRead: async () => {
          const first = (await other.query(`SELECT expires_at FROM chainlake.leases WHERE name = 'committer'`)).rows[0]!.expires_at as Date;
          for (let i = 0; i < 100 && !(await other.query(`SELECT NOW() > $1::timestamptz + interval '1 second' AS past`, [first])).rows[0]!.past; i++)
            await new Promise((resolve) => setTimeout(resolve, 100));
          taken = await takeLease(other, 'another-worker', 60);
        },
      });
      expect(taken, 'another worker took the lease while the decoding held it').toBe(false);
      // One snapshot, the decoding's: nobody committed in between.
      const after = await snapshotIds(url);
      expect(after).toEqual([...before, before.at(-1)! + 1]);
      expect(await controlRun(url, r.runId)).toMatchObject({ status: 'complete', report: { snapshot: after.at(-1) } });
    } finally {
      await other.query(`DELETE FROM chainlake.leases WHERE holder = 'another-worker'`);
      await other.end();
    }
  }, 120_000);

  it('a decoding whose lease was taken meanwhile commits nothing, and its run says failed and why', async () => {
    const { url, store } = worked!;
    const before = await snapshotIds(url);
    const other = await connect(url);
    let runId: string | undefined;
    try {
      const failed = await decodeDistributedLake({
        catalog: url,
        store,
        network: 'mainnet',
        datasets: await erc20(),
        // Another committer takes over (as one does once a lease has run out), and keeps the lease.
        afterRead: async () => {
          runId = String((await other.query(`SELECT holder FROM chainlake.leases WHERE name = 'committer'`)).rows[0]!.holder);
          await other.query(`UPDATE chainlake.leases SET holder = 'another-worker' WHERE name = 'committer'`);
        },
      }).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(failed?.message).toMatch(/the committer lease is no longer held by/);
      expect(await snapshotIds(url)).toEqual(before);
      const run = await controlRun(url, runId!);
      expect(run).toMatchObject({ job: '(decode)', status: 'failed', finished: true });
      expect(String(run!.report.error)).toMatch(/the committer lease is no longer held/);
    } finally {
      await other.query(`DELETE FROM chainlake.leases WHERE name = 'committer'`);
      await other.end();
    }
  }, 120_000);
});
