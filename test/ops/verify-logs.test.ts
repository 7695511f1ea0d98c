// verify of event logs and their decoded datasets on a real decoded lake. event_logs' windows are counted against
// the API by the times of their blocks (their rows carry no block number); the decoded datasets hold exactly what
// their logs decode to (rows, values and decode rejects). A row deleted, changed or added by another DuckLake writer
// is found in its dataset alone; an event log deleted is found in its window, and `--repair` fetches that window
// alone and decodes it again; logs exported before the job decoded are found undecoded until `chainlake decode`.
import type { DuckDBConnection } from '@duckdb/node-api';
import { cp } from 'node:fs/promises';
import path from 'node:path';
import { parseAbiItem, toEventSelector, type AbiEvent } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DecodeSpec } from '../../src/decode/spec.js';
import type { VerificationRow } from '../../src/load/ledger/verifications.js';
import { parseJob, type Job } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { planVerifySession, verifySession } from '../../src/pipeline/verify/session.js';
import { A_ERC20_0 } from '../../src/simulator/chain.js';
import { chainFor, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { A_MULTI, A_ODD_ERC20, A_SHOWCASE, showcaseEvents, STANDARD_SIGNATURES } from '../../src/simulator/token-events.js';
import { referenceMissing, withReference } from '../ducklake/helpers.js';
import { runCliCapturing } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

const SEED = 3;
const chain = chainFor(SEED, 'small', 'mainnet');
const A = (i: number): string => chain.addrLower(i);
const T = (sig: string): string => toEventSelector(parseAbiItem(sig) as AbiEvent);
const TRANSFER = T(STANDARD_SIGNATURES.erc20Transfer);

let sim: RunningSimulator;
let tmp: Awaited<ReturnType<typeof tempDir>>;
/** The export decoded in its run (the showcase contract's ABI from the API), and the same export not decoded. */
let decoded: string;
let plain: string;

const SPEC: DecodeSpec = { standard: ['erc20', 'erc1155'], contracts: [{ address: A(A_SHOWCASE), name: 'showcase' }] };

const jobOf = (lake: string, decode?: DecodeSpec): Job =>
  parseJob(
    {
      name: 'verify-decoded',
      target: 'simulator',
      lake,
      // 1,000 blocks hold what each check needs (seed 3): 623 decoded transfers and 3 rejects (the odd token's
      // short data), 40 ERC-1155 transfers, four showcase datasets with rows, nine scopes to count.
      range: { fromBlock: 0, toBlock: 1000 },
      datasets: {
        event_logs: {
          contracts: [
            { address: A(A_ERC20_0), topics: [TRANSFER] },
            // Some of its Transfers have short data: decoding rejects them.
            { address: A(A_ODD_ERC20), topics: [TRANSFER] },
            { address: A(A_MULTI), topics: [T(STANDARD_SIGNATURES.transferSingle)] },
            { address: A(A_MULTI), topics: [T(STANDARD_SIGNATURES.transferBatch)] },
            ...showcaseEvents()
              .filter((e) => !e.anonymous)
              .map((e) => ({ address: A(A_SHOWCASE), topics: [toEventSelector(e)] })),
          ],
        },
      },
      ...(decode ? { decode } : {}),
    },
    'verify-decoded',
    process.env,
  );

const decodedRows = (rows: readonly VerificationRow[]): Map<string, VerificationRow> =>
  new Map(rows.filter((r) => r.check === 'decoded_rows').map((r) => [r.dataset, r]));

/** A copy of the decoded lake, named `name`, as another DuckLake writer left it: `write` run on it through the reference extension. */
async function asOtherWriter(name: string, write: (conn: DuckDBConnection) => Promise<void>): Promise<string> {
  const lake = path.join(tmp.dir, name);
  await cp(decoded, lake, { recursive: true });
  await withReference(path.join(lake, 'catalog.duckdb'), write);
  return lake;
}

beforeAll(async () => {
  sim = await startSimulator({ seed: SEED });
  tmp = await tempDir('chainlake-verify-decoded-');
  decoded = path.join(tmp.dir, 'decoded');
  plain = path.join(tmp.dir, 'plain');
  for (const [lake, decode] of [
    [decoded, SPEC],
    [plain, undefined],
  ] as const)
    expect((await runJob(jobOf(lake, decode), { simulator: sim })).errors).toEqual([]);
}, 120_000);
afterAll(async () => {
  await sim?.close();
  await tmp?.cleanup();
});

describe('verify: decoded rows one-to-one with their logs', () => {
  it('a lake decoded in its run holds: every decoded dataset, its rejects, the ABI asked of the API as the run did', async () => {
    const plan = await planVerifySession(jobOf(decoded, SPEC), { kind: 'local', lake: decoded }, {});
    const s = await verifySession(jobOf(decoded, SPEC), { kind: 'local', lake: decoded }, {}, { simulator: sim });
    const found = decodedRows(s.rows);
    expect([...found.keys()]).toEqual(expect.arrayContaining(['erc20_transfer_events', 'erc20_approval_events', 'erc1155_transfer_events']));
    expect([...found.keys()].filter((d) => d.startsWith('showcase_')).length).toBeGreaterThan(1);
    for (const r of found.values()) expect(r, r.dataset).toMatchObject({ status: 'held' });
    const transfers = found.get('erc20_transfer_events')!;
    expect(transfers.lakeCount).toBeGreaterThan(10);
    expect(transfers.detail).toMatch(/^\d+ rows and [1-9]\d* rejects, as the lake's logs decode$/);
    expect(found.get('erc1155_transfer_events')!.lakeCount).toBeGreaterThan(0);
    expect(s.holds).toBe(true);
    // event_logs' windows counted by their blocks' times: every one held.
    const logCounts = s.rows.filter((r) => r.check === 'count' && r.dataset === 'event_logs');
    expect(logCounts.length).toBeGreaterThan(5);
    expect(logCounts.filter((r) => r.status !== 'held')).toEqual([]);
    expect(s.rows.filter((r) => r.check === 'range_filter' && r.dataset === 'event_logs' && r.status === 'held').length).toBe(logCounts.length);
    // A count per scope, the block times of the range's two ends (asked once), the showcase contract's ABI (the run
    // asked the API too: the lake holds no contracts dataset); the plan says as much.
    expect(s.requests).toBe(logCounts.length + 2 + 1);
    // Every log inside a committed window of its scope, by the same block times (asked once, by the count check).
    expect(s.rows.filter((r) => r.check === 'rows_in_windows' && r.dataset === 'event_logs')).toEqual([expect.objectContaining({ status: 'held' })]);
    expect(plan.requests).toBe(s.requests);
  }, 120_000);

  it.skipIf(referenceMissing())(
    'rows deleted, changed and added by another writer: that dataset differs, naming each, the others hold',
    async () => {
      const lake = await asOtherWriter('tampered', async (conn) => {
        const keys = (
          await conn.runAndReadAll('SELECT transaction_hash, log_index FROM erc20_transfer_events ORDER BY transaction_hash, log_index LIMIT 2')
        ).getRowObjectsJS();
        const [a, b] = keys as { transaction_hash: string; log_index: bigint }[];
        await conn.run(`DELETE FROM erc20_transfer_events WHERE transaction_hash = '${a!.transaction_hash}' AND log_index = ${a!.log_index}`);
        await conn.run(`UPDATE erc20_transfer_events SET value = value + 1 WHERE transaction_hash = '${b!.transaction_hash}' AND log_index = ${b!.log_index}`);
        await conn.run(
          `INSERT INTO erc20_transfer_events SELECT * REPLACE ('0x' || repeat('ab', 32) AS transaction_hash) FROM erc20_transfer_events WHERE transaction_hash = '${b!.transaction_hash}'`,
        );
      });
      const s = await verifySession(jobOf(lake, SPEC), { kind: 'local', lake }, {}, { simulator: sim });
      const found = decodedRows(s.rows);
      expect(found.get('erc20_transfer_events')).toMatchObject({
        status: 'differs',
        detail:
          "1 row the logs decode to missing; 1 row no log of the lake decodes to; 1 row whose values differ from their log's decoding: run `chainlake decode` to decode the lake’s logs again (it also drops the rows whose log is gone)",
      });
      for (const r of found.values()) if (r.dataset !== 'erc20_transfer_events') expect(r, r.dataset).toMatchObject({ status: 'held' });
      expect(s.holds).toBe(false);
    },
    120_000,
  );

  it.skipIf(referenceMissing())(
    'an event log another writer deleted: its window differs, its decoded row has no log; --repair fetches that window alone, decodes it, and verify holds',
    async () => {
      const lake = await asOtherWriter('log-deleted', async (conn) => {
        const [row] = (
          await conn.runAndReadAll(
            `SELECT transaction_hash, log_index FROM event_logs WHERE address = '${A(A_ERC20_0)}' ORDER BY "timestamp" DESC, log_index LIMIT 1`,
          )
        ).getRowObjectsJS() as { transaction_hash: string; log_index: bigint }[];
        await conn.run(`DELETE FROM event_logs WHERE transaction_hash = '${row!.transaction_hash}' AND log_index = ${row!.log_index}`);
      });
      const job = jobOf(lake, SPEC);
      const s = await verifySession(job, { kind: 'local', lake }, {}, { simulator: sim, repair: true });
      const before = s.beforeRepair!;
      const differs = before.rows.filter((r) => r.status === 'differs').map((r) => [r.check, r.dataset, r.scope, r.lakeCount, r.apiCount, r.detail]);
      expect(differs).toEqual([
        ['count', 'event_logs', expect.stringContaining(A(A_ERC20_0)), expect.any(Number), expect.any(Number), 'the lake lacks 1 rows the API lists'],
        ['decoded_rows', 'erc20_transfer_events', null, expect.any(Number), null, expect.stringMatching(/^1 row no log of the lake decodes to: /)],
      ]);
      expect(before.differing.map((w) => w.scopeKey)).toEqual([expect.stringContaining(A(A_ERC20_0))]);
      // After the repair: the log is back, decoded again in the repair's commit, and everything holds.
      expect(s.rows.filter((r) => r.status === 'differs')).toEqual([]);
      expect(s.holds).toBe(true);
    },
    120_000,
  );

  it.skipIf(referenceMissing())(
    'a decoded row whose log another writer deleted: `chainlake decode` drops it (and rewrites nothing else), then its dataset holds',
    async () => {
      const lake = await asOtherWriter('orphan', async (conn) => {
        await conn.run(
          `DELETE FROM event_logs WHERE (transaction_hash, log_index) IN (SELECT (transaction_hash, log_index) FROM erc20_transfer_events ORDER BY ALL LIMIT 1)`,
        );
      });
      const spec = { standard: ['erc20'] } as DecodeSpec;
      const before = decodedRows((await verifySession(jobOf(lake, spec), { kind: 'local', lake }, {}, { simulator: sim })).rows);
      expect(before.get('erc20_transfer_events')).toMatchObject({ status: 'differs', detail: expect.stringMatching(/^1 row no log of the lake decodes to: /) });
      // The other writer's delete is a delete file, which `decode` reads only once a compaction merged it.
      const compact = await runCliCapturing(['compact', '--lake', lake, '-q']);
      expect(compact.code, compact.stderr).toBe(0);
      const cli = await runCliCapturing(['decode', '--lake', lake, '--standard', 'erc20', '-q']);
      expect(cli.code, cli.stderr).toBe(0);
      const after = decodedRows((await verifySession(jobOf(lake, spec), { kind: 'local', lake }, {}, { simulator: sim })).rows);
      expect(after.get('erc20_transfer_events')).toMatchObject({ status: 'held', lakeCount: before.get('erc20_transfer_events')!.lakeCount! - 1 });
    },
    120_000,
  );

  it.skipIf(referenceMissing())(
    'a log another writer added outside every window of its scope is found by its time',
    async () => {
      const lake = await asOtherWriter('log-outside', async (conn) => {
        await conn.run(
          `INSERT INTO event_logs SELECT * REPLACE ('0x' || repeat('cd', 32) AS transaction_hash, "timestamp" + INTERVAL 400 DAY AS "timestamp")
       FROM event_logs WHERE address = '${A(A_ERC20_0)}' ORDER BY ALL LIMIT 1`,
        );
      });
      const s = await verifySession(jobOf(lake, SPEC), { kind: 'local', lake }, {}, { simulator: sim });
      expect(s.rows.filter((r) => r.check === 'rows_in_windows' && r.dataset === 'event_logs')).toEqual([
        expect.objectContaining({ status: 'differs', detail: expect.stringMatching(/^1 rows of 2025-.* lie outside every committed window of their scopes$/) }),
      ]);
    },
    120_000,
  );

  it('logs exported before the job decoded are undecoded (rows and rejects missing) until `chainlake decode`; then it holds', async () => {
    const lake = path.join(tmp.dir, 'later');
    await cp(plain, lake, { recursive: true });
    const spec = { standard: ['erc20'] } as DecodeSpec;
    const before = decodedRows((await verifySession(jobOf(lake, spec), { kind: 'local', lake }, {}, { simulator: sim })).rows);
    expect(before.get('erc20_transfer_events')).toMatchObject({ status: 'differs', lakeCount: 0 });
    expect(before.get('erc20_transfer_events')!.detail).toMatch(
      /^[1-9]\d* rows the logs decode to missing; [1-9]\d* logs rejected by decoding without a reject: /,
    );
    const cli = await runCliCapturing(['decode', '--lake', lake, '--standard', 'erc20', '-q']);
    expect(cli.code, cli.stderr).toBe(0);
    const after = await verifySession(jobOf(lake, spec), { kind: 'local', lake }, {}, { simulator: sim });
    expect([...decodedRows(after.rows).values()].map((r) => [r.dataset, r.status])).toEqual([
      ['erc20_transfer_events', 'held'],
      ['erc20_approval_events', 'held'],
    ]);
    expect(after.holds).toBe(true);
    // A job decoding one token judges that token's rows only: the odd token's rows, decoded above, are not its own.
    const one = { standard: ['erc20'], tokens: [A(A_ERC20_0)] } as DecodeSpec;
    const narrow = decodedRows((await verifySession(jobOf(lake, one), { kind: 'local', lake }, {}, { simulator: sim })).rows);
    const all = decodedRows(after.rows).get('erc20_transfer_events')!;
    expect(narrow.get('erc20_transfer_events')).toMatchObject({ status: 'held' });
    expect(narrow.get('erc20_transfer_events')!.lakeCount).toBeLessThan(all.lakeCount!);
    expect(narrow.get('erc20_transfer_events')!.lakeCount).toBeGreaterThan(0);
  }, 120_000);
});
