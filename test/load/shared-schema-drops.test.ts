// Another DuckLake writer (a user's DuckDB with the reference `ducklake` extension, ../shared/ducklake-ref/) drops or
// empties a table chainlake writes, or changes a decoded table. A table it drops (expired or not), or drops and creates
// again under its name, voids the ledger's claims: the next run fetches its whole range again; a table it empties is not voided (`verify` finds the rows gone).
// A decoded table it drops is refused by a commit that would make it again holding only its own logs' rows; a column
// it adds to one is kept, a type promotion followed. test/load/shared-schema.test.ts has the columns of a table
// chainlake writes; test/distributed/shared-lake.test.ts the distributed lake's.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeLake } from '../../src/decode/lake.js';
import { resolveDatasets } from '../../src/decode/spec.js';
import { openEngine } from '../../src/load/engine.js';
import { LakePaths } from '../../src/load/paths.js';
import { compactLake } from '../../src/load/write/maintenance.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { estimatePlan } from '../../src/pipeline/estimate.js';
import { formatReport } from '../../src/pipeline/report.js';
import { formatPlan } from '../../src/cli/commands/plan.js';
import type { Logger } from '../../src/pipeline/log.js';
import { verifySession } from '../../src/pipeline/verify/session.js';
import { A_ERC20_0 } from '../../src/simulator/chain.js';
import { chainFor } from '../../src/simulator/index.js';
import { A_SHOWCASE, SHOWCASE_SIGNATURES, showcaseEvents, STANDARD_SIGNATURES } from '../../src/simulator/token-events.js';
import { parseAbiItem, toEventSelector, type AbiEvent } from 'viem';
import { REFERENCE_DIR } from '../ducklake/helpers.js';
import { queryCatalog } from '../helpers/lake.js';
import { onTestHook } from '../../src/load/test-hooks.js';
import { byKey, HAS_REF, json, marksOf, refRows, sharedSchemaLakes, snapshotOf, withRef, type Rows } from './shared-schema-fixture.js';

if (!HAS_REF) console.warn(`shared-schema-drops tests skipped: the reference ducklake extension is not at ${REFERENCE_DIR} (see its README)`);

const lakes = sharedSchemaLakes();
const job = lakes.job;

describe.skipIf(!HAS_REF)('another DuckLake writer drops or empties a table chainlake writes, or changes a decoded one (single machine)', () => {
  // One rule for a table another writer dropped, whether or not it expired the snapshots that knew it: before
  // expiry, the message names the snapshot where the dropped table's rows still read.
  it.each([
    { drop: 'dropped and expired', expire: true },
    { drop: 'dropped (not expired)', expire: false },
  ])("a table $drop by another writer voids the ledger's claims: an incremental run fetches its whole range again, and says so", async ({ expire }) => {
    // The first incremental run, made once for both cases; each drops the table in a copy of its lake.
    const lake = await lakes.copyOfBuilt(
      'nightly',
      async (made) => expect((await runJob(job(made, 2, { incremental: true }), { simulator: lakes.sim })).status).toBe('complete'),
      expire ? 'expired' : 'dropped',
    );
    const nightly = job(lake, 2, { incremental: true });
    const before = byKey(await refRows(lake));
    expect(before.size).toBeGreaterThan(0);
    const marks = () => marksOf(lake);
    const [{ block }] = (await marks()) as [{ block: bigint }];
    const readable = await snapshotOf(lake);
    // Expired, the reference's catalog has no row of the table at all: nothing says it was there. Not expired, its
    // ended rows name the drop, and the rows before it still read.
    await withRef(lake, [
      'DROP TABLE lake.transactions',
      ...(expire
        ? ["CALL ducklake_expire_snapshots('lake', older_than => now() + INTERVAL 1 HOUR)", "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)"]
        : []),
    ]);
    const dropped = await snapshotOf(lake);
    const tableRows = await queryCatalog(lake, `SELECT count(*) AS n FROM ducklake_table WHERE table_name = 'transactions' AND end_snapshot IS NULL`);
    expect(tableRows).toEqual([{ n: 0n }]);
    expect(await queryCatalog(lake, `SELECT count(*) AS n FROM ducklake_table WHERE table_name = 'transactions'`)).toEqual([{ n: expire ? 0n : 1n }]);

    const counted = `the ledger counts blocks up to ${block} of 2 scopes on mainnet of transactions as loaded, but `;
    const says = new RegExp(
      expire
        ? `${counted}the lake has no table transactions nor any record of one`
        : `${counted}another DuckLake writer dropped the lake's table transactions \\(snapshot ${dropped}\\): those claims are void, and transactions's whole range is fetched again into a new table; the dropped table's rows stay readable in the snapshots before the drop until they are expired \\(SELECT \\* FROM transactions AT \\(VERSION => ${readable}\\)\\)`,
    );
    // Until a run plans it, the ledger's claims stand: what writes or rewrites the table without planning refuses.
    if (!expire)
      await expect(compactLake(new LakePaths(lake))).rejects.toMatchObject({
        code: 'CHAINLAKE_SCHEMA_CHANGED',
        message: expect.stringMatching(/the lake's table transactions was dropped by another DuckLake writer \(snapshot \d+\) and no run has planned it since/),
      });
    const plan = await estimatePlan(nightly, { simulator: lakes.sim, probe: false });
    expect(plan.voided).toEqual([{ dataset: 'transactions', scopes: 2, block: Number(block), windows: 0, ...(expire ? {} : { dropped, readable }) }]);
    expect(plan.windows.length).toBeGreaterThan(0);
    expect(formatPlan(plan)).toMatch(says);

    // A run stopped as it starts (no window committed): its start made the table again, and the void lasts. Without
    // that, the next run would find a table and the old watermarks, and fetch nothing.
    const stop = new AbortController();
    const warnings: string[] = [];
    const logger: Logger = {
      log: (level, event, message) => {
        if (level === 'warn' && event === 'ledger.voided') warnings.push(message);
        if (event === 'run.start') stop.abort();
      },
    };
    const stopped = await runJob(nightly, { simulator: lakes.sim, signal: stop.signal, logger });
    expect(stopped.status).toBe('interrupted');
    expect(stopped.voided?.map((v) => v.dataset)).toEqual(['transactions']);
    expect(warnings).toEqual([expect.stringMatching(says)]);
    expect(formatReport(stopped)).toMatch(says);
    expect(await marks()).toEqual([{ n: 0n, block: null }]);
    expect(await refRows(lake)).toEqual([]);

    const report = await runJob(nightly, { simulator: lakes.sim });
    expect(report.status).toBe('complete');
    expect(report.voided).toBeUndefined();
    const after = byKey(await refRows(lake));
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    for (const [key, row] of before) expect(after.get(key), key).toBe(row);
    expect(await marks()).toEqual([{ n: 2n, block }]);
    if (expire) return;
    // The time travel the message names reads the dropped table's rows, beside the table made again.
    const old = byKey(await withRef(lake, [`USE lake`, `SELECT * FROM transactions AT (VERSION => ${readable}) ORDER BY ALL`]));
    expect([...old.keys()].sort()).toEqual([...before.keys()].sort());
    for (const [key, row] of before) expect(old.get(key), key).toBe(row);
  });

  it("a table another writer drops and creates again under its name voids the ledger's claims: the next incremental run fetches the whole range again and merges it into the table as it is now (keeping that writer's rows), and says so; later runs do not void again", async () => {
    const lake = await lakes.copyOfBuilt(
      'nightly',
      async (made) => expect((await runJob(job(made, 2, { incremental: true }), { simulator: lakes.sim })).status).toBe('complete'),
      'recreated',
    );
    const nightly = job(lake, 2, { incremental: true });
    const before = byKey(await refRows(lake));
    const [{ block }] = (await marksOf(lake)) as [{ block: bigint }];
    const readable = await snapshotOf(lake);
    // Replaced by a table partitioned as chainlake's, holding the even blocks' rows only and a row of the writer's own
    // (a key no fetch gives).
    await withRef(lake, [
      'CREATE OR REPLACE TABLE lake.transactions AS SELECT * FROM lake.transactions WHERE false',
      'ALTER TABLE lake.transactions SET PARTITIONED BY (network, block_date)',
      `INSERT INTO lake.transactions SELECT * FROM lake.transactions AT (VERSION => ${readable}) WHERE block_number % 2 = 0`,
      `INSERT INTO lake.transactions SELECT * REPLACE ('0xfeed' AS transaction_hash) FROM lake.transactions LIMIT 1`,
    ]);
    const mine = await withRef(lake, [`SELECT * FROM lake.transactions WHERE transaction_hash = '0xfeed'`]);
    expect(mine).toHaveLength(1);
    const kept = byKey(await refRows(lake));
    expect([...before.keys()].filter((k) => !kept.has(k)).length).toBeGreaterThan(0);
    const [{ dropped }] = (await queryCatalog(
      lake,
      `SELECT max(end_snapshot) AS dropped FROM ducklake_table WHERE table_name = 'transactions' AND end_snapshot IS NOT NULL`,
    )) as [{ dropped: bigint }];
    const [{ created }] = (await queryCatalog(
      lake,
      `SELECT min(begin_snapshot) AS created FROM ducklake_table WHERE table_id = (SELECT table_id FROM ducklake_table WHERE table_name = 'transactions' AND end_snapshot IS NULL)`,
    )) as [{ created: bigint }];
    const says = new RegExp(
      `the ledger counts blocks up to ${block} of 2 scopes on mainnet of transactions as loaded, but another DuckLake writer dropped the lake's table transactions \\(snapshot ${dropped}\\) and created another of that name \\(snapshot ${created}\\): those claims are void, and transactions's whole range is fetched again and merged into that table as it is now; the dropped table's rows stay readable in the snapshots before the drop until they are expired \\(SELECT \\* FROM transactions AT \\(VERSION => ${readable}\\)\\)`,
    );
    const plan = await estimatePlan(nightly, { simulator: lakes.sim, probe: false });
    expect(plan.voided).toEqual([
      { dataset: 'transactions', scopes: 2, block: Number(block), windows: 0, dropped: Number(dropped), readable, recreated: Number(created) },
    ]);
    expect(formatPlan(plan)).toMatch(says);

    const report = await runJob(nightly, { simulator: lakes.sim });
    expect(report.status).toBe('complete');
    expect(formatReport(report)).toMatch(says);
    const after = byKey(await refRows(lake));
    // Every row a clean run loads, each as it loaded it, and the other writer's row kept.
    expect([...after.keys()].sort()).toEqual([...before.keys(), '0xfeed'].sort());
    for (const [key, row] of before) expect(after.get(key), key).toBe(row);
    expect(await marksOf(lake)).toEqual([{ n: 2n, block }]);
    // The claims are now on the table as it is: the next run voids nothing and fetches nothing already loaded.
    const next = await runJob(nightly, { simulator: lakes.sim });
    expect(next.status).toBe('complete');
    expect(next.voided).toBeUndefined();
    expect(byKey(await refRows(lake))).toEqual(after);
  });

  it("a snapshot dataset's table (no watermark) dropped between two commits of a run is refused, as a marked one is: the run's committed windows are its claims", async () => {
    const lake = path.join(lakes.dir, 'snapshot-drop');
    // The first run commits each window on its own (the drop comes between two of its commits).
    const doc = (commit: { commit?: { everyRows: number } }) => ({
      name: 'holdings',
      target: 'simulator',
      lake,
      concurrency: 1,
      ...commit,
      datasets: { token_holdings: { addresses: lakes.addresses } },
    });
    let commits = 0;
    let dropped: number | undefined;
    // The reference drops the table once the run's first commit is in, as its second is prepared.
    onTestHook(async (step) => {
      if (step !== 'prepared' || ++commits !== 2) return;
      await withRef(lake, ['DROP TABLE lake.token_holdings']);
      dropped = await snapshotOf(lake);
    });
    const error = await runJob(parseJob(doc({ commit: { everyRows: 1 } }), 'shared-schema-test', process.env), { simulator: lakes.sim }).then(
      () => undefined,
      (e: unknown) => e as { code?: string; message: string },
    );
    onTestHook();
    expect(dropped).toBeDefined();
    expect(await queryCatalog(lake, `SELECT count(*) AS n FROM watermarks WHERE dataset = 'token_holdings'`)).toEqual([{ n: 0n }]);
    expect(error?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
    expect(error?.message).toMatch(/the lake's table token_holdings was dropped by another DuckLake writer \(snapshot \d+\) and no run has planned it since/);
    expect(await snapshotOf(lake)).toBe(dropped);
    // The next run plans it as on an empty lake (a snapshot dataset is fetched whole): the rows the first commit wrote
    // into the dropped table are in the table made again.
    const pairs = async (at = '') =>
      (await withRef(lake, ['USE lake', `SELECT DISTINCT holder_address, token_address FROM token_holdings${at} ORDER BY ALL`])).map((r) => json([r]));
    const committed = await pairs(` AT (VERSION => ${dropped! - 1})`);
    expect(committed.length).toBeGreaterThan(0);
    // (Its commits as a job's are by default: how they are cut is not what it shows.)
    expect((await runJob(parseJob(doc({}), 'shared-schema-test', process.env), { simulator: lakes.sim })).status).toBe('complete');
    expect(await pairs()).toEqual(expect.arrayContaining(committed));
  });

  it("a table another writer emptied (DELETE without WHERE) is not voided: its rows are its writer's to delete; `verify` finds them gone and `--repair` fetches them again", async () => {
    const lake = path.join(lakes.dir, 'emptied');
    const nightly = job(lake, 1, { incremental: true });
    expect((await runJob(nightly, { simulator: lakes.sim })).status).toBe('complete');
    const before = byKey(await refRows(lake));
    await withRef(lake, ['DELETE FROM lake.transactions']);
    const report = await runJob(nightly, { simulator: lakes.sim });
    expect(report.voided).toBeUndefined();
    expect(await refRows(lake)).toEqual([]);

    const verified = await verifySession(nightly, { kind: 'local', lake }, {}, { simulator: lakes.sim, repair: true });
    expect(verified.beforeRepair?.holds).toBe(false);
    expect(verified.beforeRepair?.differing.length).toBeGreaterThan(0);
    expect(verified.holds).toBe(true);
    const after = byKey(await refRows(lake));
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    for (const [key, row] of before) expect(after.get(key), key).toBe(row);
  });

  it("a decoded table another writer drops: the run's commit refuses, nothing written; `chainlake decode` makes it again from every log. A dropped `_rejects` is made again, empty, and said", async () => {
    const lake = path.join(lakes.dir, 'derived');
    const token = chainFor(5, 'small', 'mainnet').addrLower(A_ERC20_0);
    const transfers = { address: token, topics: [toEventSelector(parseAbiItem(STANDARD_SIGNATURES.erc20Transfer) as AbiEvent)] };
    const run = (toBlock: number, log?: Logger) => {
      const doc = {
        name: 'derived',
        target: 'simulator',
        lake,
        range: { fromBlock: 0, toBlock },
        datasets: { event_logs: { contracts: [transfers] } },
        decode: { standard: ['erc20'] },
      };
      return runJob(parseJob(doc, 'shared-schema-test', process.env), { simulator: lakes.sim, ...(log ? { logger: log } : {}) });
    };
    expect((await run(3000)).errors).toEqual([]);
    const table = String(
      (await queryCatalog(lake, `SELECT table_name FROM ducklake_table WHERE table_name LIKE 'erc20%' AND end_snapshot IS NULL`))[0]!.table_name,
    );
    const decoded = (): Promise<Rows> => withRef(lake, [`SELECT * EXCLUDE (_run_id, _ingested_at) FROM lake.${table} ORDER BY ALL`]);
    const before = await decoded();
    expect(before.length).toBeGreaterThan(0);
    await withRef(lake, [`DROP TABLE lake.${table}`]);
    const dropped = await snapshotOf(lake);

    // Its commit would decode only its own logs into a table made again: refused, saying how to decode it whole.
    const error = await run(6000).then(
      () => undefined,
      (e: unknown) => e as { code?: string; message: string; hint?: string },
    );
    expect(error?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
    expect(error?.message).toBe(
      `the lake's table ${table}, derived from the lake's other tables, was dropped by another DuckLake writer (snapshot ${dropped}): a commit would create it again holding only the rows it derives now, without every row derived before`,
    );
    expect(error?.hint).toMatch(/`chainlake decode <job>`/);
    expect(await snapshotOf(lake)).toBe(dropped);

    const paths = new LakePaths(lake);
    const staging = paths.staging('decode-dropped');
    const engine = await openEngine({ tempDir: path.join(staging, 'tmp') });
    try {
      const datasets = await resolveDatasets({ standard: ['erc20'], contracts: [] }, { engine, paths, network: 'mainnet' });
      await decodeLake({ engine, paths, network: 'mainnet', datasets, runId: 'decode-dropped', ingestedAt: new Date().toISOString(), stagingDir: staging });
    } finally {
      engine.close();
    }
    expect(json(await decoded())).toBe(json(before));

    // `_rejects` dropped: the next run makes it again, empty, and its log, report and plan say so.
    await withRef(lake, ['DROP TABLE lake._rejects']);
    const rejectsDropped = await snapshotOf(lake);
    const says = `another DuckLake writer dropped the lake's table _rejects (snapshot ${rejectsDropped}): chainlake creates it again, empty`;
    const seen: string[] = [];
    const report = await run(6000, { log: (_level, event, message) => void seen.push(`${event}: ${message}`) });
    expect(report.errors).toEqual([]);
    expect(report.voided).toEqual([{ dataset: '_rejects', scopes: 0, block: null, windows: 0, dropped: rejectsDropped, readable: rejectsDropped - 1 }]);
    expect(seen.filter((l) => l.startsWith('ledger.voided'))).toEqual([expect.stringContaining(says)]);
    expect(await queryCatalog(lake, `SELECT count(*) AS n FROM ducklake_table WHERE table_name = '_rejects' AND end_snapshot IS NULL`)).toEqual([{ n: 1n }]);
    const decodedAfter = await decoded();
    expect(decodedAfter.length).toBeGreaterThan(before.length);
  });

  it('decoding keeps a column another writer added to a decoded table, and refuses logs whose column it renamed, before writing anything', async () => {
    const lake = path.join(lakes.dir, 'logs');
    const token = chainFor(5, 'small', 'mainnet').addrLower(A_ERC20_0);
    const transfers = { address: token, topics: [toEventSelector(parseAbiItem(STANDARD_SIGNATURES.erc20Transfer) as AbiEvent)] };
    // The logs of blocks up to `toBlock`, decoded in the run's commit.
    const run = async (toBlock: number) => {
      const doc = {
        name: 'logs',
        target: 'simulator',
        lake,
        range: { fromBlock: 0, toBlock },
        datasets: { event_logs: { contracts: [transfers] } },
        decode: { standard: ['erc20'] },
      };
      expect((await runJob(parseJob(doc, 'shared-schema-test', process.env), { simulator: lakes.sim })).errors).toEqual([]);
    };
    await run(3000);
    const table = String(
      (await queryCatalog(lake, `SELECT table_name FROM ducklake_table WHERE table_name LIKE 'erc20%' AND end_snapshot IS NULL`))[0]!.table_name,
    );
    const decoded = (): Promise<Rows> => withRef(lake, [`SELECT * EXCLUDE (_run_id, _ingested_at) FROM lake.${table} ORDER BY ALL`]);
    // A note on the last decoded row: the next run's blocks start in its day, which the run's decoding rewrites.
    await withRef(lake, [
      `ALTER TABLE lake.${table} ADD COLUMN note VARCHAR`,
      `UPDATE lake.${table} SET note = 'checked' WHERE (transaction_hash, log_index) = (SELECT (transaction_hash, log_index) FROM lake.${table} ORDER BY "timestamp" DESC, log_index DESC LIMIT 1)`,
    ]);
    const before = await decoded();
    await run(6000);
    const rows = await decoded();
    expect(rows.length).toBeGreaterThan(before.length);
    const after = new Set(rows.map((r) => json([r])));
    for (const row of before) expect(after.has(json([row])), json([row])).toBe(true);
    expect(rows.filter((r) => r.note === 'checked')).toHaveLength(1);

    // `chainlake decode` (every log decoded again) refuses logs whose column another writer renamed.
    await withRef(lake, ['ALTER TABLE lake.event_logs RENAME COLUMN address TO emitter']);
    const snapshot = await snapshotOf(lake);
    const paths = new LakePaths(lake);
    const staging = paths.staging('decode-schema');
    const engine = await openEngine({ tempDir: path.join(staging, 'tmp') });
    try {
      const datasets = await resolveDatasets({ standard: ['erc20'], contracts: [] }, { engine, paths, network: 'mainnet' });
      const decoding = decodeLake({
        engine,
        paths,
        network: 'mainnet',
        datasets,
        runId: 'decode-schema',
        ingestedAt: new Date().toISOString(),
        stagingDir: staging,
      });
      await expect(decoding).rejects.toMatchObject({
        code: 'CHAINLAKE_SCHEMA_CHANGED',
        message: expect.stringMatching(/column address of the lake's table event_logs was renamed to emitter/),
      });
    } finally {
      engine.close();
    }
    expect(await snapshotOf(lake)).toBe(snapshot);
  });

  it('follows a type promotion of a declared column (int32 -> int64): the next commit goes through, writes the wider type and keeps the rows', async () => {
    const lake = path.join(lakes.dir, 'promoted');
    const configured = showcaseEvents().find((e) => e.name === 'Configured')!;
    const showcase = chainFor(5, 'small', 'mainnet').addrLower(A_SHOWCASE);
    const run = (toBlock: number) =>
      runJob(
        parseJob(
          {
            name: 'promoted',
            target: 'simulator',
            lake,
            range: { fromBlock: 0, toBlock },
            datasets: { event_logs: { contracts: [{ address: showcase, topics: [toEventSelector(configured)] }] } },
            decode: { contracts: [{ address: showcase, name: 'show', signatures: [SHOWCASE_SIGNATURES[0]!] }] },
          },
          'shared-schema-test',
          process.env,
        ),
        { simulator: lakes.sim },
      );
    expect((await run(2000)).errors).toEqual([]);
    const rows = async () => (await withRef(lake, ['SELECT * EXCLUDE (_run_id, _ingested_at) FROM lake.show_configured ORDER BY ALL'])).map((r) => json([r]));
    const typeOf = async () =>
      (await queryCatalog(lake, `SELECT column_type FROM ducklake_column WHERE column_name = 'level' AND end_snapshot IS NULL`)).map((r) => r.column_type);
    expect(await typeOf()).toEqual(['int32']);
    await withRef(lake, ['ALTER TABLE lake.show_configured ALTER COLUMN level SET DATA TYPE BIGINT']);
    expect(await typeOf()).toEqual(['int64']);
    const before = await rows();
    expect(before.length).toBeGreaterThan(0);

    const report = await run(4000);
    expect(report.errors).toEqual([]);
    expect(report.decoded?.datasets[0]?.rows).toBeGreaterThan(0);
    const after = await rows();
    expect(after.length).toBeGreaterThan(before.length);
    expect(after).toEqual(expect.arrayContaining(before));
    expect(await typeOf()).toEqual(['int64']);
    // The files the commit wrote carry the column's type (a data file is written in the catalog's column types).
    const written = await withRef(lake, [`SELECT data_file FROM ducklake_list_files('lake', 'show_configured')`]);
    expect(written.length).toBeGreaterThan(0);
    const types = await withRef(lake, [
      `SELECT DISTINCT type FROM parquet_schema([${written.map((f) => `'${String(f.data_file).replace(/'/g, "''")}'`).join(', ')}]) WHERE name = 'level'`,
    ]);
    expect(types).toEqual([{ type: 'INT64' }]);
  });
});
