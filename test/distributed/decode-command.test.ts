// `chainlake decode --catalog`: a distributed lake's committed event logs (of a job without a `decode` key)
// decoded later, as `chainlake decode --lake` decodes a local lake's: the same decoded rows, types and rejects,
// committed as one snapshot; decoding again replaces instead of adding; the reference extension reads them.
import path from 'node:path';
import { parseAbiItem, toEventSelector, type AbiEvent } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCatalog } from '../../src/distributed/control-plane.js';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { openDistributedLake } from '../../src/distributed/read.js';
import { runWorker } from '../../src/distributed/worker.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { A_ERC20_0, A_ERC721_0 } from '../../src/simulator/chain.js';
import { chainFor } from '../../src/simulator/index.js';
import { A_ODD_ERC20, STANDARD_SIGNATURES } from '../../src/simulator/token-events.js';
import { openReference, referenceMissing } from '../ducklake/helpers.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { runCliInProcess } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { distributedRows, singleMachineRows } from './helpers.js';

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

beforeAll(async () => {
  pg = await startPostgres();
  process.env.PGPASSWORD = pg.password;
  tmp = await tempDir('chainlake-decode-cmd-');
}, 120_000);

afterAll(async () => {
  await pg?.stop();
  await tmp?.cleanup();
});

async function snapshotIds(catalog: string): Promise<number[]> {
  const cat = await openCatalog(catalog);
  try {
    return (await cat.catalog.query(`SELECT snapshot_id FROM ducklake_snapshot ORDER BY 1`)).map((r) => Number(r.snapshot_id));
  } finally {
    await cat.client.end();
  }
}

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
    const worked = await runWorker({ catalog: db.url, store, id: 'w1', untilIdle: true, pollMs: 100, leaseSeconds: 60 });
    expect(worked.windowsFailed).toBe(0);
    const before = await snapshotIds(db.url);
    const dist = await decodeCli(['--catalog', db.url, '--store', store]);
    expect(dist.stderr).toBe('');
    expect(dist.code).toBe(0);
    // The same report: logs read, rows and days of each dataset, rejects, skipped logs.
    expect(comparable(dist.report)).toEqual(comparable(local.report));
    const after = await snapshotIds(db.url);

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
});
