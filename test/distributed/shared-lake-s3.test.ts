// Another DuckLake writer on a distributed lake whose store is object storage (s3rver), as shared-lake.test.ts has one
// on a directory: a committer that writes out a partition the reference extension changed first copies that
// partition's files down from the bucket (they are on no disk of its own), and uploads the file it writes. The
// reference cannot read the catalog's `s3://` data path here (DuckDB has no httpfs, and installs nothing): it attaches
// with the lake's files through a local copy of the bucket's `lake/` (DATA_PATH, OVERRIDE_DATA_PATH), as a user with
// the bucket mounted would; its inlined inserts and deletes go into the PostgreSQL catalog, which is all that is
// shared. Decoding reads the lake's event logs through the same reader: a `decode --catalog` decodes the logs as the
// reference reads them, inlined or written out.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STANDARD_TOPICS } from '../../src/decode/datasets.js';
import { openCatalog } from '../../src/distributed/control-plane.js';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { openStore, type Store } from '../../src/distributed/store.js';
import { runWorker } from '../../src/distributed/worker.js';
import { parseJob } from '../../src/pipeline/job.js';
import { A_BUSY0, A_ERC20_0 } from '../../src/simulator/chain.js';
import { chainFor } from '../../src/simulator/index.js';
import { referenceMissing, withReference } from '../ducklake/helpers.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { runCliCapturing } from '../helpers/cli.js';
import { chainlakeQuery, INSERT, inserted, jobDoc } from './helpers.js';
import { startS3, type TestS3 } from './s3.js';

type Rows = Record<string, unknown>[];
const plain = (rows: Rows) => rows.map((r) => JSON.stringify(r, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));

const chain = chainFor(1, 'small', 'mainnet');
const ADDRESSES = [1, 2].map((i) => chain.addrLower(A_BUSY0 + i));

/** An ERC-20 token's Transfer logs (a scope of its own per token), decoded in the committer's transaction. */
const decodingDoc = (name: string, token: number) => ({
  name,
  network: 'mainnet',
  target: 'simulator',
  simulator: { seed: 1, scale: 'small' },
  // The end of the chain's first day and the start of its second (7,200 blocks a day).
  range: { fromBlock: 6_000, toBlock: 8_399 },
  datasets: { event_logs: { contracts: [{ address: chain.addrLower(A_ERC20_0 + token), topics: [STANDARD_TOPICS.Transfer] }] } },
  decode: { standard: ['erc20'] },
});
const DECODED = 'erc20_transfer_events';
const word = (hex: string) => `0x${hex.padStart(64, '0')}`;

const missing = referenceMissing();

describe.skipIf(missing !== null)(
  `a distributed lake on object storage (s3rver) shared with the reference DuckLake extension${missing ? ` (${missing})` : ''}`,
  () => {
    let pg: TestPostgres;
    let s3: TestS3;
    let db: Awaited<ReturnType<TestPostgres['database']>>;
    let mirror: Store;
    const saved = new Map<string, string | undefined>();
    const store = 's3://lake/shared';

    /** The bucket's `lake/` on this machine, for the reference: every current object downloaded (names never change). */
    async function mirrored(): Promise<string> {
      for (const f of await mirror.list('lake')) await mirror.localCopy(f.location);
      return mirror.localDataPath;
    }
    const withRef = async (statements: string[]) => withReference(db.url, statements, { dataPath: await mirrored() });
    const refRows = () => withRef(['SELECT * FROM ref.transactions ORDER BY transaction_hash']);
    const chainlakeRows = () => chainlakeQuery(db.url, store, 'SELECT * FROM transactions ORDER BY transaction_hash', s3.connection);

    /** Live rows the catalog holds inlined (another writer's inserts), and deletes it holds inlined of current files. */
    async function inlinedCounts(url = db.url): Promise<{ rows: number; deletes: number }> {
      const { client, catalog } = await openCatalog(url);
      try {
        const count = async (sql: string) => Number((await catalog.query(sql))[0]?.n);
        const present = async (table: string) => (await catalog.query(`SELECT to_regclass($1) AS r`, [`ducklake.${table}`]))[0]?.r !== null;
        let rows = 0;
        for (const t of await catalog.query('SELECT table_name FROM ducklake_inlined_data_tables')) {
          const name = String(t.table_name);
          if (await present(name)) rows += await count(`SELECT count(*) AS n FROM "${name}" WHERE end_snapshot IS NULL`);
        }
        let deletes = 0;
        for (const t of await catalog.query(
          `SELECT table_name FROM information_schema.tables WHERE table_schema = 'ducklake' AND table_name LIKE 'ducklake_inlined_delete_%'`,
        ))
          deletes += await count(
            `SELECT count(*) AS n FROM "${String(t.table_name)}" x JOIN ducklake_data_file f ON f.data_file_id = x.file_id AND f.end_snapshot IS NULL`,
          );
        return { rows, deletes };
      } finally {
        await client.end();
      }
    }

    async function distributedRun(
      name: string,
      addresses: readonly string[],
      lake = { url: db.url, store },
      doc: object = jobDoc(name, addresses),
    ): Promise<void> {
      const { url, store } = lake;
      await enqueueJob(parseJob(doc, name, process.env), doc, { catalog: url, store, storeConnection: s3.connection });
      // A worker's own store: a fresh copy of the bucket's files, none of the files another run wrote.
      const report = await runWorker({ catalog: url, store, storeConnection: s3.connection, id: `${name}-w`, account: 'w', untilIdle: true, pollMs: 50 });
      expect(report.windowsFailed).toBe(0);
    }

    beforeAll(async () => {
      pg = await startPostgres();
      s3 = await startS3(['lake']);
      // The AWS SDK finds its credentials in the environment by itself; the endpoint goes by option.
      for (const k of Object.keys(s3.credentials)) saved.set(k, process.env[k]);
      Object.assign(process.env, s3.credentials);
      db = await pg.database();
      mirror = await openStore(store, s3.connection);
      await distributedRun('one', ADDRESSES.slice(0, 1));
    }, 180_000);

    afterAll(async () => {
      await mirror?.close();
      await pg?.stop();
      await s3?.stop();
      for (const [k, v] of saved) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    });

    it("a workers' commit, then compact, write out the partitions the reference changed: its inserts kept, its deletes gone", async () => {
      // Through the catalog's own data path the reference cannot open the lake here; through the local copy it can, and
      // its writes leave the catalog's data path as it was.
      await expect(withReference(db.url, ['SELECT 1'])).rejects.toThrow(/Data path s3:\/\/lake\/shared\/lake\/ requires the extension httpfs/);
      const dataPath = () => withRef([`SELECT value FROM __ducklake_metadata_ref.ducklake.ducklake_metadata WHERE key = 'data_path'`]);
      const days = (await withRef(['SELECT DISTINCT CAST(block_date AS VARCHAR) AS d FROM ref.transactions ORDER BY 1'])).map((r) => String(r.d));
      expect(days.length).toBeGreaterThanOrEqual(5);
      const hashes = (rows: Rows) => rows.map((r) => String(r.transaction_hash));
      // Rows of the first address that the second's windows do not fetch (a row the API returns again is back).
      const untouched = `coalesce(sender, '') <> '${ADDRESSES[1]}' AND coalesce(receiver, '') <> '${ADDRESSES[1]}'`;
      const victimsIn = async (some: string[]) =>
        (
          await withRef([
            `SELECT min(transaction_hash) AS h FROM ref.transactions WHERE CAST(block_date AS VARCHAR) IN (${some.map((d) => `'${d}'`).join(', ')}) AND ${untouched} GROUP BY block_date ORDER BY 1`,
          ])
        ).map((r) => String(r.h));
      const remove = (victims: string[]) => `DELETE FROM ref.transactions WHERE transaction_hash IN (${victims.map((h) => `'${h}'`).join(', ')})`;

      // Inlined into the catalog (the reference's default for small writes): rows into two days of chainlake's files,
      // and deletes of a row of each of two days' files.
      const victims = await victimsIn([days[1]!, days[2]!]);
      expect(victims).toHaveLength(2);
      await withRef([INSERT + [inserted('0xref-a', days[0]!, 1), inserted('0xref-b', days[1]!, 2)].join(', '), remove(victims)]);
      const changes = JSON.stringify(await withRef(['SELECT changes FROM ref.snapshots() ORDER BY snapshot_id DESC LIMIT 2']));
      expect(changes).toMatch(/inlined_insert/);
      expect(changes).toMatch(/inlined_delete/);
      expect(await inlinedCounts()).toEqual({ rows: 2, deletes: 2 });
      expect(await dataPath()).toEqual([{ value: 's3://lake/shared/lake/' }]);
      const before = await refRows();
      expect(hashes(before)).toEqual(expect.arrayContaining(['0xref-a', '0xref-b']));
      for (const h of victims) expect(hashes(before), h).not.toContain(h);
      expect(plain(await chainlakeRows())).toEqual(plain(before));

      // The workers' commit of a second address, whose rows land in every one of those days: the committer (a fresh
      // store, none of the lake's files on its disk) writes each changed day out from the bucket's files and the
      // catalog's inlined rows, and uploads it; nothing stays inlined.
      await distributedRun('two', ADDRESSES.slice(1));
      expect(await inlinedCounts()).toEqual({ rows: 0, deletes: 0 });
      const after = await refRows();
      const afterHashes = hashes(after);
      expect(new Set(afterHashes).size).toBe(afterHashes.length);
      expect(afterHashes).toEqual(expect.arrayContaining(hashes(before)));
      expect(after.length).toBeGreaterThan(before.length);
      for (const h of victims) expect(afterHashes, h).not.toContain(h);
      for (const h of ['0xref-a', '0xref-b']) expect(after.find((r) => r.transaction_hash === h)?._run_id, h).toBe('reference');
      expect(plain(await chainlakeRows())).toEqual(plain(after));

      // Again, then `compact --catalog` writes the changed days out.
      const more = await victimsIn([days[3]!]);
      expect(more).toHaveLength(1);
      await withRef([INSERT + inserted('0xref-c', days[4]!, 3), remove(more)]);
      expect(await inlinedCounts()).toEqual({ rows: 1, deletes: 1 });
      const changed = await refRows();
      expect(changed.length).toBe(after.length);
      const c = await runCliCapturing(['compact', '--catalog', db.url, '--store', store], s3.env);
      expect(c.code, c.stderr).toBe(0);
      expect(await inlinedCounts()).toEqual({ rows: 0, deletes: 0 });
      expect(plain(await refRows())).toEqual(plain(changed));
      expect(plain(await chainlakeRows())).toEqual(plain(changed));
      const q = await runCliCapturing(
        ['query', '--catalog', db.url, '--store', store, '--format', 'csv', 'SELECT transaction_hash, _run_id FROM transactions ORDER BY transaction_hash'],
        s3.env,
      );
      expect(q.code, q.stderr).toBe(0);
      expect(q.stdout.trim().split('\n').slice(1)).toEqual(changed.map((r) => `${String(r.transaction_hash)},${String(r._run_id)}`));
      expect(q.stdout).toContain('0xref-c,reference');
      expect(q.stdout).not.toContain(more[0]);
    }, 300_000);

    it("decoding, in a workers' commit and by `decode --catalog`, reads the event logs the reference inserted and deleted", async () => {
      const lake = { url: (await pg.database()).url, store: 's3://lake/decoding' };
      const own = await openStore(lake.store, s3.connection);
      try {
        const withRef = async (statements: string[]) => {
          for (const f of await own.list('lake')) await own.localCopy(f.location);
          return withReference(lake.url, statements, { dataPath: own.localDataPath });
        };
        const keys = async (table: string, where = 'true') =>
          (await withRef([`SELECT transaction_hash || '/' || log_index AS k FROM ref.${table} WHERE ${where} ORDER BY 1`])).map((r) => String(r.k));
        // Every log of this lake is an ERC-20 Transfer: the decoded table holds one row per log the reference reads,
        // and chainlake reads the same decoded rows.
        const decodedAsLogs = async (): Promise<string[]> => {
          const logs = await keys('event_logs');
          expect(await keys(DECODED)).toEqual(logs);
          const order = `SELECT * FROM %s ORDER BY transaction_hash, log_index`;
          const rows = await withRef([order.replace('%s', `ref.${DECODED}`)]);
          expect(plain(await chainlakeQuery(lake.url, lake.store, order.replace('%s', DECODED), s3.connection))).toEqual(plain(rows));
          return logs;
        };
        const decodeCli = async (): Promise<Record<string, unknown>> => {
          const r = await runCliCapturing(['decode', '--catalog', lake.url, '--store', lake.store, '--standard', 'erc20', '--format', 'json'], s3.env);
          expect(r.code, r.stderr).toBe(0);
          return JSON.parse(r.stdout.slice(r.stdout.indexOf('{'))) as Record<string, unknown>;
        };
        const decodedRow = async (hash: string) =>
          withRef([`SELECT sender, receiver, CAST(value AS VARCHAR) AS value FROM ref.${DECODED} WHERE transaction_hash = '${hash}'`]);
        // A Transfer log no API returns (a made-up transaction), copied from the day's first log: another sender and value.
        const insertLog = (hash: string, day: string, sender: string, value: number) =>
          `INSERT INTO ref.event_logs SELECT * REPLACE ('${hash}' AS transaction_hash, '${word(sender.slice(2))}' AS topic_1, '${word(value.toString(16))}' AS data, 'reference' AS _run_id)
           FROM ref.event_logs WHERE CAST(block_date AS VARCHAR) = '${day}' ORDER BY transaction_hash, log_index LIMIT 1`;
        const firstOf = async (day: string) =>
          (
            await withRef([
              `SELECT transaction_hash, log_index FROM ref.event_logs WHERE CAST(block_date AS VARCHAR) = '${day}' AND _run_id <> 'reference' ORDER BY 1, 2 LIMIT 1`,
            ])
          )[0]!;
        const deleteLog = (log: Record<string, unknown>, table = 'event_logs') =>
          `DELETE FROM ref.${table} WHERE transaction_hash = '${String(log.transaction_hash)}' AND log_index = ${String(log.log_index)}`;
        // A decoded row of no log (a made-up transaction), copied from the day's first decoded row.
        const insertDecoded = (hash: string, day: string) =>
          `INSERT INTO ref.${DECODED} SELECT * REPLACE ('${hash}' AS transaction_hash, 'reference' AS _run_id)
           FROM ref.${DECODED} WHERE CAST(block_date AS VARCHAR) = '${day}' ORDER BY transaction_hash, log_index LIMIT 1`;

        await distributedRun('logs-a', [], lake, decodingDoc('logs-a', 0));
        const first = await decodedAsLogs();
        expect(first.length).toBeGreaterThan(100);
        const days = (await withRef(['SELECT DISTINCT CAST(block_date AS VARCHAR) AS d FROM ref.event_logs ORDER BY 1'])).map((r) => String(r.d));
        expect(days).toHaveLength(2);

        // Inlined into the catalog: a log inserted into one day, a log of another day deleted; then `decode --catalog`
        // decodes the logs as the reference reads them (the inserted one decoded, the deleted one's row gone, the
        // decoded table's changes undone), the logs still inlined (decoding writes only the decoded tables).
        const sender = `0x${'ab'.repeat(20)}`;
        const hashA = `0x${'e1'.repeat(32)}`;
        const goneA = await firstOf(days[1]!);
        // And in the decoded table: a row of no log inserted, the row of a log that is still there deleted.
        const orphanA = `0x${'d1'.repeat(32)}`;
        const undecoded = await firstOf(days[0]!);
        await withRef([insertLog(hashA, days[0]!, sender, 123_456_789), deleteLog(goneA), insertDecoded(orphanA, days[1]!), deleteLog(undecoded, DECODED)]);
        expect(await inlinedCounts(lake.url)).toEqual({ rows: 2, deletes: 2 });
        const read = await keys('event_logs');
        const keyA = await keys('event_logs', `transaction_hash = '${hashA}'`);
        expect(keyA).toHaveLength(1);
        expect(read).toEqual([...first.filter((k) => k !== `${String(goneA.transaction_hash)}/${String(goneA.log_index)}`), ...keyA].sort());
        const decodedNow = await keys(DECODED);
        expect(decodedNow).not.toEqual(read);
        expect(decodedNow.filter((k) => k.startsWith(orphanA))).toHaveLength(1);
        expect(decodedNow).not.toContain(`${String(undecoded.transaction_hash)}/${String(undecoded.log_index)}`);
        const report = await decodeCli();
        expect(report.logs).toBe(read.length);
        expect(await decodedAsLogs()).toEqual(read);
        expect(await decodedRow(hashA)).toEqual([{ sender, receiver: expect.stringMatching(/^0x[0-9a-f]{40}$/), value: '123456789' }]);
        expect(await inlinedCounts(lake.url)).toEqual({ rows: 1, deletes: 1 });

        // Again, then a workers' commit of another token with decode: the committer writes the changed days of both tables
        // out (their files on no disk of its own) and decodes its batch's logs; then `decode --catalog` reads the
        // written-out days.
        const hashB = `0x${'e2'.repeat(32)}`;
        const goneB = await firstOf(days[0]!);
        const orphanB = `0x${'d2'.repeat(32)}`;
        await withRef([insertLog(hashB, days[1]!, sender, 42), deleteLog(goneB), insertDecoded(orphanB, days[0]!)]);
        const decodedBefore = await keys(DECODED);
        expect(decodedBefore.filter((k) => k.startsWith(orphanB))).toHaveLength(1);
        expect(await inlinedCounts(lake.url)).toEqual({ rows: 3, deletes: 2 });
        await distributedRun('logs-b', [], lake, decodingDoc('logs-b', 1));
        expect(await inlinedCounts(lake.url)).toEqual({ rows: 0, deletes: 0 });
        const tokenB = await keys('event_logs', `address = '${chain.addrLower(A_ERC20_0 + 1)}'`);
        expect(tokenB.length).toBeGreaterThan(100);
        // As on one machine, a commit decodes its own batch's logs: the reference's changes (its decoded row of no log
        // kept through the day's rewrite) wait for `decode`.
        expect(await keys(DECODED)).toEqual([...decodedBefore, ...tokenB].sort());
        const all = await keys('event_logs');
        const goneKeyB = `${String(goneB.transaction_hash)}/${String(goneB.log_index)}`;
        const keyB = await keys('event_logs', `transaction_hash = '${hashB}'`);
        expect(keyB).toHaveLength(1);
        expect(all).toEqual([...read.filter((k) => k !== goneKeyB), ...keyB, ...tokenB].sort());
        expect((await decodeCli()).logs).toBe(all.length);
        expect(await decodedAsLogs()).toEqual(all);
        expect(await decodedRow(hashB)).toEqual([{ sender, receiver: expect.stringMatching(/^0x[0-9a-f]{40}$/), value: '42' }]);
        const q = await runCliCapturing(
          [
            'query',
            '--catalog',
            lake.url,
            '--store',
            lake.store,
            '--format',
            'csv',
            `SELECT transaction_hash, value FROM ${DECODED} WHERE sender = '${sender}' ORDER BY 1`,
          ],
          s3.env,
        );
        expect(q.code, q.stderr).toBe(0);
        expect(q.stdout.trim().split('\n').slice(1)).toEqual([`${hashA},123456789`, `${hashB},42`]);
      } finally {
        await own.close();
      }
    }, 300_000);
  },
);
