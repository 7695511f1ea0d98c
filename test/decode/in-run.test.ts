// Decoding in the export run (each commit decodes its own event logs from its merge) gives the lake that
// `chainlake decode` gives over the same export, and decoding it again changes nothing.
import path from 'node:path';
import { parseAbiItem, toEventSelector, type AbiEvent } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeLake } from '../../src/decode/lake.js';
import { resolveDatasets, type DecodeSpec } from '../../src/decode/spec.js';
import { openEngine } from '../../src/load/engine.js';
import { LakePaths } from '../../src/load/paths.js';
import { parseJob } from '../../src/pipeline/job.js';
import type { Logger } from '../../src/pipeline/log.js';
import { runJob } from '../../src/pipeline/run.js';
import { A_ERC20_0, A_ERC721_0 } from '../../src/simulator/chain.js';
import { chainFor, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { A_MULTI, A_ODD_ERC20, A_SHOWCASE, PING_CHANNEL, showcaseEvents, STANDARD_SIGNATURES } from '../../src/simulator/token-events.js';
import { cp, readdir } from 'node:fs/promises';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { withDuck } from '../load/helpers.js';

const SEED = 3;
// 3,500 blocks: every decoded dataset still has rows (the fewest: 5 ERC-721 approvals, 7 approvals for all), the odd
// token's short Transfers are rejects, and a run decoding in commits of 150 rows commits four times.
const TO = 3_500;
const chain = chainFor(SEED, 'small', 'mainnet');
const A = (i: number): string => chain.addrLower(i);
const T = (sig: string): string => toEventSelector(parseAbiItem(sig) as AbiEvent);
const TRANSFER = T(STANDARD_SIGNATURES.erc20Transfer),
  APPROVAL = T(STANDARD_SIGNATURES.erc20Approval),
  ALL = T(STANDARD_SIGNATURES.approvalForAll),
  SINGLE = T(STANDARD_SIGNATURES.transferSingle),
  BATCH = T(STANDARD_SIGNATURES.transferBatch);
const SHOWCASE = showcaseEvents();

let sim: RunningSimulator;
const cleanups: (() => Promise<void>)[] = [];
/** The export decoded in its run, built once: each test that changes it works on a copy (`copyOf`). */
let decodedInRun: Awaited<ReturnType<typeof exportLake>>;
/** The odd token's export decoded in its run (`oddJob`), built once: each test works on a copy. */
let oddInRun: { lake: string; report: Awaited<ReturnType<typeof runJob>>; events: { event: string; fields?: Record<string, unknown> }[] };

beforeAll(async () => {
  sim = await startSimulator({ seed: SEED });
  decodedInRun = await exportLake(true);
  const { dir, cleanup } = await tempDir();
  cleanups.push(cleanup);
  const events: { event: string; fields?: Record<string, unknown> }[] = [];
  const report = await runJob(oddJob(dir), { simulator: sim, logger: { log: (_l, event, _m, fields) => events.push({ event, fields }) } });
  oddInRun = { lake: dir, report, events };
}, 300_000);
afterAll(async () => {
  await sim?.close();
  for (const c of cleanups) await c();
});

const spec = (address: string): DecodeSpec => ({ standard: ['erc20', 'erc721', 'erc1155'], contracts: [{ address, name: 'showcase' }] });

/** A lake exported from the simulator, with `decode` in the job or not; the run's log events. */
async function exportLake(decode: boolean): Promise<{ lake: string; events: { event: string; fields?: Record<string, unknown> }[] }> {
  const { dir, cleanup } = await tempDir();
  cleanups.push(cleanup);
  const c = (i: number, topics: string[]): { address: string; topics: string[] }[] => topics.map((t) => ({ address: A(i), topics: [t] }));
  const job = parseJob(
    {
      name: 'decode-in-run',
      target: 'simulator',
      lake: dir,
      range: { fromBlock: 0, toBlock: TO },
      // Decoding in the run, small commits: most batches are decoded while the run still fetches, the last one
      // after. The export decoded afterwards commits as a run does by default: its commits do not change its rows.
      ...(decode ? { commit: { everyRows: 150 } } : {}),
      datasets: {
        event_logs: {
          contracts: [
            ...c(A_ERC20_0, [TRANSFER, APPROVAL]),
            ...c(A_ODD_ERC20, [TRANSFER]),
            ...c(A_ERC721_0, [TRANSFER, APPROVAL, ALL]),
            ...c(A_MULTI, [SINGLE, BATCH, ALL]),
            ...c(
              A_SHOWCASE,
              SHOWCASE.map((e) => (e.anonymous ? PING_CHANNEL : toEventSelector(e))),
            ),
          ],
        },
      },
      ...(decode ? { decode: spec(A(A_SHOWCASE)) } : {}),
    },
    'decode-in-run',
    process.env,
  );
  const events: { event: string; fields?: Record<string, unknown> }[] = [];
  const logger: Logger = { log: (_level, event, _message, fields) => events.push({ event, fields }) };
  const r = await runJob(job, { simulator: sim, logger });
  expect(r.errors).toEqual([]);
  return { lake: dir, events };
}

/**
 * The odd ERC-20's Transfer logs (some with short data: decoding rejects) listed by two scopes: all of the
 * token's, and its mints (from the zero address). A small export, decoded in its run.
 */
const oddJob = (lake: string) =>
  parseJob(
    {
      name: 'decode-twice',
      target: 'simulator',
      lake,
      range: { fromBlock: 0, toBlock: TO },
      datasets: {
        event_logs: {
          contracts: [
            { address: A(A_ODD_ERC20), topics: [TRANSFER] },
            { address: A(A_ODD_ERC20), topics: [TRANSFER, `0x${'0'.repeat(64)}`] },
          ],
        },
      },
      decode: { standard: ['erc20'] },
    },
    'decode-twice',
    process.env,
  );

/** A copy of a lake in a temporary folder of its own, for a test to change. */
async function copyOf(lake: string): Promise<string> {
  const t = await tempDir();
  cleanups.push(t.cleanup);
  const to = path.join(t.dir, 'lake');
  await cp(lake, to, { recursive: true });
  return to;
}

/** `chainlake decode` over the whole lake, as a run of its own. */
async function decodeAll(lake: string, runId: string, asked: DecodeSpec = spec(A(A_SHOWCASE))): Promise<void> {
  const paths = new LakePaths(lake);
  const staging = paths.staging(runId);
  const engine = await openEngine({ tempDir: path.join(staging, 'tmp') });
  try {
    const fetchAbi = async (address: string): Promise<unknown> => {
      const res = await fetch(`${sim.urls.mainnet}/v1/contracts/${address}/abi`, { headers: { 'api-key': sim.apiKey } });
      return ((await res.json()) as { results: { data: unknown } }).results.data;
    };
    const datasets = await resolveDatasets(asked, { engine: engine, paths, network: 'mainnet', fetchAbi });
    await decodeLake({ engine, paths, network: 'mainnet', datasets, runId, ingestedAt: new Date().toISOString(), stagingDir: staging });
  } finally {
    engine.close();
  }
}

/** Every decoded dataset's rows without the run columns, and the decoding's rejects, as JSON text. */
async function decodedRows(lake: string): Promise<Record<string, string>> {
  const names = (await queryCatalog(lake, `SELECT table_name FROM information_schema.tables ORDER BY 1`))
    .map((r) => String(r.table_name))
    .filter((n) => /_events$|^showcase_/.test(n));
  const out: Record<string, string> = {};
  const json = (rows: unknown): string => JSON.stringify(rows, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  for (const n of names) out[n] = json(await queryCatalog(lake, `SELECT * EXCLUDE (_run_id, _ingested_at) FROM ${n} ORDER BY ALL`));
  out._rejects = json(
    // Every row: a re-decoding replaces the rejects of the logs it decodes again, it does not add to them.
    await queryCatalog(lake, `SELECT dataset, reason, entry::VARCHAR AS entry FROM _rejects WHERE "window" LIKE 'decode/%' ORDER BY ALL`),
  );
  return out;
}

/** Rows of the decoded datasets' files that come before the row above them in (timestamp, transaction_index, log_index) order. */
async function unsortedRows(lake: string): Promise<number> {
  const files = (await readdir(lake, { recursive: true }))
    .filter((f) => /^main\/(\w+_events|showcase_\w+)\/.*\.parquet$/.test(f))
    .map((f) => `'${path.join(lake, f)}'`);
  expect(files.length).toBeGreaterThan(8);
  return withDuck(async (q) => {
    const [r] = await q(
      `SELECT count(*)::INTEGER AS n FROM (
         SELECT "timestamp" AS t, transaction_index AS x, log_index AS l, lag("timestamp") OVER w AS pt, lag(transaction_index) OVER w AS px, lag(log_index) OVER w AS pl
         FROM read_parquet([${files.join(', ')}], filename = true, file_row_number = true, union_by_name = true) WINDOW w AS (PARTITION BY filename ORDER BY file_row_number))
       WHERE pt IS NOT NULL AND (t, x, l) < (pt, px, pl)`,
    );
    return Number(r!.n);
  });
}

describe('decoding in the export run', () => {
  it('a log fetched twice in the run (the lake keeps one): decoded once, in the commit, from the merged rows', async () => {
    const { report: r, events } = oddInRun;
    const dir = await copyOf(oddInRun.lake);
    expect(r.errors).toEqual([]);
    expect(r.totals.rows).toBeGreaterThan(r.totals.landed);
    expect(events.find((e) => e.event === 'decode.done')?.fields?.beside).toBe(true);
    const n = await queryCatalog(dir, `SELECT count(*)::INTEGER AS n, count(DISTINCT (transaction_hash, log_index))::INTEGER AS k FROM erc20_transfer_events`);
    expect(n[0]!.n).toBeGreaterThan(0);
    expect(n[0]!.n).toBe(n[0]!.k);
    const before = await decodedRows(dir);
    await decodeAll(dir, 'decode-twice-again', { standard: ['erc20'], contracts: [] });
    expect(await decodedRows(dir)).toEqual(before);
  }, 180_000);

  it('ABIs from the run’s own contracts dataset: decoded after the last commit, as chainlake decode decodes them', async () => {
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const job = (lake: string, decode: boolean) =>
      parseJob(
        {
          name: 'decode-abi-from-run',
          target: 'simulator',
          lake,
          range: { fromBlock: 0, toBlock: TO },
          // Small commits decoding in the run; the export decoded afterwards commits as a run does by default.
          ...(decode ? { commit: { everyRows: 150 } } : {}),
          datasets: {
            event_logs: { contracts: SHOWCASE.map((e) => ({ address: A(A_SHOWCASE), topics: [e.anonymous ? PING_CHANNEL : toEventSelector(e)] })) },
            contracts: { contracts: [A(A_SHOWCASE)] },
          },
          ...(decode ? { decode: { contracts: [{ address: A(A_SHOWCASE), name: 'showcase' }] } } : {}),
        },
        'decode-abi-from-run',
        process.env,
      );
    const events: { event: string; fields?: Record<string, unknown> }[] = [];
    const inRun = path.join(dir, 'in-run');
    const r = await runJob(job(inRun, true), { simulator: sim, logger: { log: (_l, event, _m, fields) => events.push({ event, fields }) } });
    expect(r.errors).toEqual([]);
    expect(events.find((e) => e.event === 'decode.done')?.fields?.beside).toBe(false);
    const afterwards = path.join(dir, 'afterwards');
    expect((await runJob(job(afterwards, false), { simulator: sim })).errors).toEqual([]);
    await decodeAll(afterwards, 'decode-abi-afterwards', { standard: [], contracts: [{ address: A(A_SHOWCASE), name: 'showcase' }] });
    const a = await decodedRows(inRun);
    expect(Object.keys(a).length).toBeGreaterThan(3);
    expect(a).toEqual(await decodedRows(afterwards));
  }, 180_000);

  it('gives the rows chainlake decode gives over the same export, and decoding again changes none', async () => {
    const inRun = { ...decodedInRun, lake: await copyOf(decodedInRun.lake) };
    expect(inRun.events.filter((e) => e.event === 'commit').length).toBeGreaterThan(2);
    // Decoded in the commits, not read back from the lake after them.
    expect(inRun.events.find((e) => e.event === 'decode.done')?.fields?.beside).toBe(true);
    const afterwards = await exportLake(false);
    await decodeAll(afterwards.lake, 'decode-afterwards');
    const a = await decodedRows(inRun.lake);
    const b = await decodedRows(afterwards.lake);
    expect(Object.keys(a).length).toBeGreaterThan(8);
    for (const k of Object.keys(a)) expect(a[k], k).not.toBe('[]');
    expect(a).toEqual(b);
    // Each day written from the merge's order (or sorted when decoded in several statements) is in order.
    expect(await unsortedRows(inRun.lake)).toBe(0);
    // Re-decoding the in-run lake: the same rows (one per key), now the re-decoding's.
    await decodeAll(inRun.lake, 'decode-again');
    expect(await decodedRows(inRun.lake)).toEqual(a);
    const runs = await queryCatalog(inRun.lake, `SELECT DISTINCT _run_id FROM erc20_transfer_events`);
    expect(runs).toEqual([{ _run_id: 'decode-again' }]);
  }, 180_000);

  it('a run that fetches the same range again decodes its logs again: their rejects are replaced, not added', async () => {
    const rejects = async (lake: string) =>
      queryCatalog(
        lake,
        `SELECT count(*)::INTEGER AS n, count(DISTINCT (dataset, entry->>'transaction_hash', entry->>'log_index'))::INTEGER AS k FROM _rejects WHERE "window" LIKE 'decode/%'`,
      );
    // The odd token's export: its short logs are decoding rejects; fetched and decoded again in a second run.
    const dir = await copyOf(oddInRun.lake);
    expect(oddInRun.report.errors).toEqual([]);
    const [once] = await rejects(dir);
    expect(once!.n).toBeGreaterThan(0);
    expect(once!.n).toBe(once!.k);
    const rows = await decodedRows(dir);
    const again = await runJob(oddJob(dir), { simulator: sim, fullRefresh: true });
    expect(again.errors).toEqual([]);
    expect(again.totals.rows).toBeGreaterThan(0);
    expect(await rejects(dir)).toEqual([once]);
    expect(await decodedRows(dir)).toEqual(rows);
  }, 180_000);
});
