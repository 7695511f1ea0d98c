// A job's `decode` key in distributed mode: enqueue resolves the decoded datasets, the committer decodes each
// batch's event logs in the batch's own commit (the same decoding as one machine's commit), and the lake it
// gives equals one machine's, row for row, for chainlake and for the reference ducklake extension.
import path from 'node:path';
import { parseAbiItem, toEventSelector, type AbiEvent } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCatalog } from '../../src/distributed/control-plane.js';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { openDistributedLake } from '../../src/distributed/read.js';
import { runWorker } from '../../src/distributed/worker.js';
import { decodeDistributedLake } from '../../src/distributed/decode.js';
import { resolveDatasets } from '../../src/decode/spec.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { verifySession } from '../../src/pipeline/verify/session.js';
import type { VerificationRow } from '../../src/load/ledger/verifications.js';
import { A_ERC20_0, A_ERC721_0 } from '../../src/simulator/chain.js';
import { chainFor } from '../../src/simulator/index.js';
import { A_MULTI, A_ODD_ERC20, A_SHOWCASE, PING_CHANNEL, showcaseEvents, STANDARD_SIGNATURES } from '../../src/simulator/token-events.js';
import { openReference, referenceMissing } from '../ducklake/helpers.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { distributedRows, singleMachineRows } from './helpers.js';

const SEED = 3;
const TO = 5_000;
const chain = chainFor(SEED, 'small', 'mainnet');
const A = (i: number): string => chain.addrLower(i);
const T = (sig: string): string => toEventSelector(parseAbiItem(sig) as AbiEvent);
const TRANSFER = T(STANDARD_SIGNATURES.erc20Transfer),
  APPROVAL = T(STANDARD_SIGNATURES.erc20Approval),
  ALL = T(STANDARD_SIGNATURES.approvalForAll),
  SINGLE = T(STANDARD_SIGNATURES.transferSingle),
  BATCH = T(STANDARD_SIGNATURES.transferBatch);

/** The decoding job: event logs of token and showcase contracts, decoded into the standard datasets and the showcase's (its ABI from the API). */
function decodingDoc(lake: string): Record<string, unknown> {
  const c = (i: number, topics: string[]): { address: string; topics: string[] }[] => topics.map((t) => ({ address: A(i), topics: [t] }));
  return {
    name: 'decode-distributed',
    target: 'simulator',
    simulator: { seed: SEED, scale: 'small' },
    lake,
    range: { fromBlock: 0, toBlock: TO },
    // Several commits on one machine (a window per scope: several for each worker).
    commit: { everyRows: 1_000 },
    datasets: {
      event_logs: {
        contracts: [
          ...c(A_ERC20_0, [TRANSFER, APPROVAL]),
          ...c(A_ODD_ERC20, [TRANSFER]),
          ...c(A_ERC721_0, [TRANSFER, APPROVAL, ALL]),
          ...c(A_MULTI, [SINGLE, BATCH, ALL]),
          ...c(
            A_SHOWCASE,
            showcaseEvents().map((e) => (e.anonymous ? PING_CHANNEL : toEventSelector(e))),
          ),
        ],
      },
    },
    decode: { standard: ['erc20', 'erc721', 'erc1155'], contracts: [{ address: A(A_SHOWCASE), name: 'showcase' }] },
  };
}

const isDecoded = (table: string): boolean => /_events$|^showcase_/.test(table);

let pg: TestPostgres;
let tmp: Awaited<ReturnType<typeof tempDir>>;
/** The lakes of the first test, for the tests after it. */
let lakes: { single: string; catalog: string; store: string; expected: Awaited<ReturnType<typeof singleMachineRows>> } | undefined;

beforeAll(async () => {
  pg = await startPostgres();
  tmp = await tempDir('chainlake-dist-decode-');
}, 120_000);

afterAll(async () => {
  await pg?.stop();
  await tmp?.cleanup();
});

/**
 * Two workers; `commitRows` small where several commits are the point (each decodes its own logs), else the
 * default: the commits that then come (a worker with nothing in hand commits) are as many as the work needs.
 */
async function work(catalog: string, store: string, commitRows?: number): Promise<void> {
  const reports = await Promise.all(
    ['d1', 'd2'].map((id) =>
      runWorker({ catalog, store, id, account: id, untilIdle: true, pollMs: 100, leaseSeconds: 60, ...(commitRows ? { commitRows } : {}) }),
    ),
  );
  expect(reports.reduce((n, r) => n + r.windowsFailed, 0)).toBe(0);
}

/** The decode rejects of a distributed lake, and their rows by key (dataset, log): a re-decoding must not add to them. */
async function decodeRejects(conn: import('@duckdb/node-api').DuckDBConnection): Promise<{ rows: number; keys: number }> {
  const [r] = (
    await conn.runAndReadAll(
      `SELECT count(*)::INTEGER, count(DISTINCT (dataset, entry->>'transaction_hash', entry->>'log_index'))::INTEGER FROM _rejects WHERE "window" LIKE 'decode/%'`,
    )
  ).getRowsJS() as [number, number][];
  return { rows: r![0], keys: r![1] };
}

describe('decoding in distributed mode', () => {
  it('a decoding job enqueued and worked gives the decoded tables one machine gives, in the snapshots of their logs', async () => {
    const single = path.join(tmp.dir, 'single');
    const job = parseJob(decodingDoc(single), 'decode-distributed', process.env);
    await runJob(job);
    const expected = await singleMachineRows(single);
    const decoded = [...expected.keys()].filter(isDecoded);
    expect(decoded.length).toBeGreaterThanOrEqual(5);
    for (const t of ['event_logs', '_rejects']) expect(expected.get(t)?.rows, t).toBeGreaterThan(0);
    expect(decoded.reduce((n, t) => n + expected.get(t)!.rows, 0)).toBeGreaterThan(100);
    const [rejects] = await queryCatalog(single, `SELECT count(*)::INTEGER AS n FROM _rejects WHERE "window" LIKE 'decode/%'`);
    expect(Number(rejects!.n), 'decode rejects on one machine').toBeGreaterThan(0);

    const db = await pg.database();
    const store = path.join(tmp.dir, 'store');
    const doc = decodingDoc(path.join(tmp.dir, 'unused'));
    const enqueued = await enqueueJob(parseJob(doc, 'decode-distributed', process.env), doc, { catalog: db.url, store });
    expect(enqueued.queued).toBeGreaterThan(2);
    await work(db.url, store, 400);
    lakes = { single, catalog: db.url, store, expected };

    const dist = await openDistributedLake({ catalog: db.url });
    try {
      for (const [name, want] of expected) {
        if (!dist.tables.includes(name)) {
          // A dataset the job does not export: declared on one machine, absent from the distributed catalog.
          expect({ name, rows: want.rows }).toEqual({ name, rows: 0 });
          continue;
        }
        // Rows and types: the digest is of the typed values, column by column.
        expect({ name, ...(await distributedRows(dist.conn, name, want.columns)) }).toEqual({ name, rows: want.rows, digest: want.digest });
        const types = async (rows: Record<string, unknown>[]) => rows.map((r) => `${String(r.column_name)} ${String(r.column_type)}`).sort();
        if (isDecoded(name)) {
          const mine = (await dist.conn.runAndReadAll(`DESCRIBE "${name}"`)).getRowObjectsJS() as Record<string, unknown>[];
          expect(await types(mine)).toEqual(await types(await queryCatalog(single, `DESCRIBE "${name}"`)));
        }
      }
    } finally {
      dist.close();
    }

    // Every decoded file was added in the snapshot that added its event logs' files: nothing decodes after.
    const cat = await openCatalog(db.url);
    try {
      const snapshots = await cat.catalog.query(
        `SELECT t.table_name, d.begin_snapshot FROM ducklake_data_file d JOIN ducklake_table t ON t.table_id = d.table_id AND t.end_snapshot IS NULL`,
      );
      const logs = new Set(snapshots.filter((r) => r.table_name === 'event_logs').map((r) => Number(r.begin_snapshot)));
      const ofDecoded = snapshots.filter((r) => isDecoded(String(r.table_name))).map((r) => Number(r.begin_snapshot));
      // Several commits (the range is small; the batches are smaller): each of them decoded its own logs.
      expect(logs.size).toBeGreaterThan(2);
      expect(ofDecoded.length).toBeGreaterThan(0);
      expect(ofDecoded.filter((s) => !logs.has(s))).toEqual([]);
    } finally {
      await cat.client.end();
    }
  }, 600_000);

  it('the same logs committed again (a new run over the same range) replace their decoded rows and decode rejects instead of adding them', async () => {
    expect(lakes, 'the lakes of the test before').toBeDefined();
    const { catalog, store, expected } = lakes!;
    let before: { rows: number; keys: number };
    const dist0 = await openDistributedLake({ catalog });
    try {
      before = await decodeRejects(dist0.conn);
    } finally {
      dist0.close();
    }
    expect(before.rows).toBe(before.keys);
    // The watermarks forgotten: the next run plans the whole range again, and its windows' logs are committed again.
    const cat = await openCatalog(catalog);
    await cat.client.query('DELETE FROM chainlake.watermarks');
    await cat.client.end();
    const doc = decodingDoc(path.join(tmp.dir, 'unused'));
    const again = await enqueueJob(parseJob(doc, 'decode-distributed', process.env), doc, { catalog, store });
    expect(again.resumed).toBe(false);
    expect(again.queued).toBeGreaterThan(2);
    await work(catalog, store);
    const dist = await openDistributedLake({ catalog });
    try {
      for (const [name, want] of expected) {
        if (!isDecoded(name)) continue;
        expect({ name, ...(await distributedRows(dist.conn, name, want.columns)) }).toEqual({ name, rows: want.rows, digest: want.digest });
      }
      expect(await decodeRejects(dist.conn)).toEqual(before);
      // Of the new run, not added beside the old ones.
      const runs = (await dist.conn.runAndReadAll(`SELECT count(DISTINCT _run_id)::INTEGER FROM _rejects WHERE "window" LIKE 'decode/%'`)).getRowsJS();
      expect(runs[0]![0]).toBe(1);
    } finally {
      dist.close();
    }
  }, 600_000);

  const missing = referenceMissing();
  it.skipIf(missing !== null)(
    `the reference ducklake extension reads the decoded tables with one machine's rows${missing ? ` (${missing})` : ''}`,
    async () => {
      expect(lakes, 'the lakes of the tests before').toBeDefined();
      const { catalog, expected } = lakes!;
      const ref = await openReference(catalog);
      try {
        for (const [name, want] of expected) {
          if (!isDecoded(name)) continue;
          expect({ name, ...(await distributedRows(ref.conn, name, want.columns)) }).toEqual({ name, rows: want.rows, digest: want.digest });
        }
      } finally {
        ref.close();
      }
    },
    120_000,
  );

  it.skipIf(missing !== null)(
    "verify --catalog: the event logs' windows and the decoded tables hold; a decoded row another writer deleted is found",
    async () => {
      expect(lakes, 'the lakes of the tests before').toBeDefined();
      const { catalog, store } = lakes!;
      const job = parseJob(decodingDoc(path.join(tmp.dir, 'unused')), 'decode-distributed', process.env);
      const target = { kind: 'distributed', catalog, store } as const;
      const decodedRows = (rows: readonly VerificationRow[]) => rows.filter((r) => r.check === 'decoded_rows');
      const whole = await verifySession(job, target, {});
      expect(whole.rows.filter((r) => r.status === 'differs')).toEqual([]);
      // The event logs' windows counted against the API by their blocks' times, as on one machine.
      expect(whole.rows.filter((r) => r.check === 'count' && r.dataset === 'event_logs' && r.status === 'held').length).toBeGreaterThan(5);
      const clean = decodedRows(whole.rows);
      expect(clean.length).toBeGreaterThanOrEqual(5);
      expect(clean.filter((r) => r.status !== 'held')).toEqual([]);
      const ref = await openReference(catalog, { write: true });
      try {
        await ref.conn.run(
          'DELETE FROM erc20_transfer_events WHERE (transaction_hash, log_index) IN (SELECT (transaction_hash, log_index) FROM erc20_transfer_events LIMIT 1)',
        );
      } finally {
        ref.close();
      }
      const after = decodedRows((await verifySession(job, target, {})).rows);
      expect(after.filter((r) => r.status !== 'held').map((r) => [r.dataset, r.detail])).toEqual([
        ['erc20_transfer_events', expect.stringMatching(/^1 row the logs decode to missing: /)],
      ]);
      // A log another writer deleted: its decoded row is without log; `chainlake decode --catalog` decodes the
      // missing row again and drops the one without log, in one snapshot.
      const ref2 = await openReference(catalog, { write: true });
      try {
        await ref2.conn.run(
          `DELETE FROM event_logs WHERE (transaction_hash, log_index) IN (SELECT (transaction_hash, log_index) FROM erc20_transfer_events WHERE token_address = '${A(A_ERC20_0)}' ORDER BY ALL LIMIT 1)`,
        );
      } finally {
        ref2.close();
      }
      const orphaned = decodedRows((await verifySession(job, target, {})).rows).find((r) => r.dataset === 'erc20_transfer_events')!;
      expect(orphaned.detail).toMatch(/^1 row the logs decode to missing; 1 row no log of the lake decodes to: /);
      const erc20 = await resolveDatasets({ standard: ['erc20'], contracts: [] }, { network: 'mainnet' });
      await decodeDistributedLake({ catalog, store, network: 'mainnet', datasets: erc20 });
      const mended = decodedRows((await verifySession(job, target, {})).rows);
      expect(mended.filter((r) => r.status !== 'held')).toEqual([]);
      expect(mended.find((r) => r.dataset === 'erc20_transfer_events')!.lakeCount).toBe(orphaned.lakeCount);
    },
    300_000,
  );
});
