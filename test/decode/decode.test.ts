// Decoding a lake's event_logs (exported from the simulator) into the standard token-event datasets and a
// verified contract's datasets, compared with viem's decoding of the same logs from the API.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { decodeEventLog, parseAbiItem, toEventSelector, type AbiEvent } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeLake, type DecodeReport } from '../../src/decode/lake.js';
import { resolveDatasets } from '../../src/decode/spec.js';
import { commitRun } from '../../src/load/write/commit-run.js';
import { openEngine } from '../../src/load/engine.js';
import { LakePaths } from '../../src/load/paths.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { A_ERC20_0, A_ERC721_0 } from '../../src/simulator/chain.js';
import { chainFor, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { A_MULTI, A_ODD_ERC20, A_SHOWCASE, PING_CHANNEL, showcaseEvents, STANDARD_SIGNATURES } from '../../src/simulator/token-events.js';
import { fetchAllPages } from '../helpers/api.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

const SHOWCASE_EVENTS = showcaseEvents();
const SEED = 3;
const TO = 3_500;
let sim: RunningSimulator;
let lake: string;
let cleanup: () => Promise<void>;
const chain = chainFor(SEED, 'small', 'mainnet');
const A = (i: number): string => chain.addrLower(i);
const T = (sig: string): string => toEventSelector(parseAbiItem(sig) as AbiEvent);
const TRANSFER = T(STANDARD_SIGNATURES.erc20Transfer),
  APPROVAL = T(STANDARD_SIGNATURES.erc20Approval),
  ALL = T(STANDARD_SIGNATURES.approvalForAll);
const SINGLE = T(STANDARD_SIGNATURES.transferSingle),
  BATCH = T(STANDARD_SIGNATURES.transferBatch);

async function decodeNow(spec: Parameters<typeof resolveDatasets>[0], runId: string, ingestedAt = new Date().toISOString()): Promise<DecodeReport> {
  const paths = new LakePaths(lake);
  const staging = paths.staging(runId);
  const engine = await openEngine({ tempDir: path.join(staging, 'tmp') });
  try {
    const datasets = await resolveDatasets(spec, { engine: engine, paths, network: 'mainnet' });
    return await decodeLake({ engine, paths, network: 'mainnet', datasets, runId, ingestedAt, stagingDir: staging });
  } finally {
    engine.close();
  }
}

beforeAll(async () => {
  sim = await startSimulator({ seed: SEED });
  ({ dir: lake, cleanup } = await tempDir());
  const c = (i: number, topics: string[]): { address: string; topics: string[] }[] => topics.map((t) => ({ address: A(i), topics: [t] }));
  const job = parseJob(
    {
      name: 'decode',
      target: 'simulator',
      lake,
      range: { fromBlock: 0, toBlock: TO },
      datasets: {
        event_logs: {
          contracts: [
            ...c(A_ERC20_0, [TRANSFER, APPROVAL]),
            ...c(A_ERC20_0 + 5, [TRANSFER, APPROVAL]),
            ...c(A_ODD_ERC20, [TRANSFER]),
            ...c(A_ERC721_0, [TRANSFER, APPROVAL, ALL]),
            ...c(A_MULTI, [SINGLE, BATCH, ALL]),
            ...c(
              A_SHOWCASE,
              SHOWCASE_EVENTS.map((e) => (e.anonymous ? PING_CHANNEL : toEventSelector(e))),
            ),
          ],
        },
        contracts: { contracts: [A(A_SHOWCASE)] },
      },
    },
    'decode-test',
    process.env,
  );
  const r = await runJob(job, { simulator: sim });
  expect(r.errors).toEqual([]);
  await decodeNow({ standard: ['erc20', 'erc721', 'erc1155'], contracts: [{ address: A(A_SHOWCASE) }] }, 'decode-test-1');
}, 120_000);

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

const logsOf = async (i: number, topic0: string): Promise<any[]> =>
  fetchAllPages(`${sim.urls.mainnet}/v1/event-logs`, sim.apiKey, { address: A(i), topic_0: topic0, start_block: 0, end_block: TO });
const topicsOf = (l: any): `0x${string}`[] => [l.topic_0, l.topic_1, l.topic_2, l.topic_3].filter((t) => t !== null);

const MAX = (1n << 256n) - 1n;
const fits = (v: bigint): boolean => v < 10n ** 38n && v > -(10n ** 38n);
/** A value as the test expects it in JSON after casting wide and 64-bit ints to text (independent of src/decode). */
function expected(type: string, v: unknown, components?: readonly any[]): unknown {
  if (type.endsWith(']')) return (v as unknown[]).map((x) => expected(type.slice(0, type.lastIndexOf('[')), x, components));
  if (type === 'tuple')
    return Object.fromEntries(components!.map((c, i) => [c.name, expected(c.type, Array.isArray(v) ? v[i] : (v as any)[c.name], c.components)]));
  const m = /^(u?)int(\d+)$/.exec(type);
  if (m) {
    const bits = Number(m[2]);
    if ((m[1] === '' && bits <= 32) || (m[1] === 'u' && bits <= 24)) return Number(v);
    if (bits <= 64) return String(v);
    return fits(v as bigint) ? String(v) : null;
  }
  if (type === 'address' || type.startsWith('bytes')) return (v as string).toLowerCase();
  return v;
}
/** The SQL giving a column as JSON with its wide and 64-bit ints as text. */
function asJson(type: string, col: string, components?: readonly any[]): string {
  const staged = (t: string, comps?: readonly any[]): string => {
    if (t.endsWith(']')) return `${staged(t.slice(0, t.lastIndexOf('[')), comps)}[]`;
    if (t === 'tuple') return `STRUCT(${comps!.map((c) => `"${c.name}" ${staged(c.type, c.components)}`).join(', ')})`;
    const m = /^(u?)int(\d+)$/.exec(t);
    if (m) return (m[1] === '' && Number(m[2]) <= 32) || (m[1] === 'u' && Number(m[2]) <= 24) ? 'INTEGER' : 'VARCHAR';
    return t === 'bool' ? 'BOOLEAN' : 'VARCHAR';
  };
  return `to_json(CAST("${col}" AS ${staged(type, components)}))::VARCHAR`;
}

describe('standard token events', () => {
  it('ERC-20 Transfer and Approval rows are viem’s decoding of the same logs; amounts exact, over 10^38 as text', async () => {
    for (const [tok, topic, ds, sig, a, b] of [
      [A_ERC20_0, TRANSFER, 'erc20_transfer_events', STANDARD_SIGNATURES.erc20Transfer, 'sender', 'receiver'],
      [A_ERC20_0 + 5, TRANSFER, 'erc20_transfer_events', STANDARD_SIGNATURES.erc20Transfer, 'sender', 'receiver'],
      [A_ERC20_0, APPROVAL, 'erc20_approval_events', STANDARD_SIGNATURES.erc20Approval, 'owner', 'spender'],
      [A_ERC20_0 + 5, APPROVAL, 'erc20_approval_events', STANDARD_SIGNATURES.erc20Approval, 'owner', 'spender'],
    ] as const) {
      const api = await logsOf(tok, topic);
      expect(api.length).toBeGreaterThan(0);
      const want = api.map((l) => {
        const d = decodeEventLog({ abi: [parseAbiItem(sig) as AbiEvent], topics: topicsOf(l) as never, data: l.data }).args as any;
        const v = d.value as bigint;
        return `${l.transaction_hash.toLowerCase()}/${l.log_index}/${String(Object.values(d)[0]).toLowerCase()}/${String(Object.values(d)[1]).toLowerCase()}/${fits(v) ? v : 'NULL'}/${fits(v) ? 'NULL' : v}`;
      });
      const got = await queryCatalog(
        lake,
        `SELECT transaction_hash || '/' || log_index || '/' || ${a} || '/' || ${b} || '/' || coalesce(value::VARCHAR, 'NULL') || '/' || coalesce(value_raw, 'NULL') AS k FROM ${ds} WHERE token_address = '${A(tok)}'`,
      );
      const g = got.map((r) => r.k).sort(),
        w = want.sort();
      const firstDiff = g.findIndex((x, i) => x !== w[i]);
      expect(firstDiff === -1 ? null : [g[firstDiff], w[firstDiff]], ds).toBe(null);
      expect(g.length).toBe(w.length);
    }
    const unlimited = await queryCatalog(lake, `SELECT count(*)::INTEGER AS n FROM erc20_approval_events WHERE value IS NULL AND value_raw = '${MAX}'`);
    expect(unlimited[0]!.n).toBeGreaterThan(0);
    const types = Object.fromEntries((await queryCatalog(lake, 'DESCRIBE erc20_transfer_events')).map((r) => [r.column_name, r.column_type]));
    expect(types).toMatchObject({
      token_address: 'VARCHAR',
      sender: 'VARCHAR',
      value: 'DECIMAL(38,0)',
      value_raw: 'VARCHAR',
      log_index: 'BIGINT',
      timestamp: 'TIMESTAMP WITH TIME ZONE',
      block_date: 'DATE',
      network: 'VARCHAR',
    });
  });

  it('ERC-721 and ERC-1155: token ids as exact text, one row per id and value of a batch', async () => {
    const nft = await logsOf(A_ERC721_0, TRANSFER);
    const got721 = await queryCatalog(
      lake,
      `SELECT transaction_hash || '/' || log_index || '/' || token_id AS k FROM erc721_transfer_events WHERE token_address = '${A(A_ERC721_0)}'`,
    );
    expect(got721.map((r) => r.k).sort()).toEqual(nft.map((l) => `${l.transaction_hash.toLowerCase()}/${l.log_index}/${BigInt(l.topic_3)}`).sort());
    const want: string[] = [];
    for (const l of [...(await logsOf(A_MULTI, SINGLE)), ...(await logsOf(A_MULTI, BATCH))]) {
      const d = decodeEventLog({
        abi: [parseAbiItem(STANDARD_SIGNATURES.transferSingle), parseAbiItem(STANDARD_SIGNATURES.transferBatch)],
        topics: topicsOf(l) as never,
        data: l.data,
      }) as any;
      const pairs: [bigint, bigint][] =
        d.eventName === 'TransferSingle' ? [[d.args.id, d.args.value]] : d.args.ids.map((id: bigint, i: number) => [id, d.args.values[i]]);
      pairs.forEach(([id, v], i) =>
        want.push(
          `${l.transaction_hash.toLowerCase()}/${l.log_index}/${i}/${d.eventName}/${d.args.from.toLowerCase()}/${id}/${fits(v) ? v : 'NULL'}/${fits(v) ? 'NULL' : v}`,
        ),
      );
    }
    const got = await queryCatalog(
      lake,
      `SELECT transaction_hash || '/' || log_index || '/' || batch_position || '/' || event || '/' || sender || '/' || token_id || '/' || coalesce(value::VARCHAR, 'NULL') || '/' || coalesce(value_raw, 'NULL') AS k FROM erc1155_transfer_events`,
    );
    expect(want.length).toBeGreaterThan((await logsOf(A_MULTI, SINGLE)).length);
    expect(got.map((r) => r.k).sort()).toEqual(want.sort());
    const all = await queryCatalog(lake, `SELECT token_address, approved FROM approval_for_all_events`);
    expect(new Set(all.map((r) => r.token_address))).toEqual(new Set([A(A_ERC721_0)]));
    expect(new Set(all.map((r) => r.approved))).toEqual(new Set([true, false]));
  });

  it('with ERC-721 decoding asked too, the ERC-721-shaped log of an ERC-20 is read as ERC-721; short data goes to _rejects', async () => {
    const odd = await logsOf(A_ODD_ERC20, TRANSFER);
    const short = odd.filter((l) => l.topics_count === '3' && l.data.length !== 66);
    const rej = await queryCatalog(lake, `SELECT reason, entry->>'transaction_hash' AS tx FROM _rejects WHERE dataset = 'erc20_transfer_events'`);
    expect(rej.map((r) => r.tx).sort()).toEqual(short.map((l) => l.transaction_hash.toLowerCase()).sort());
    for (const r of rej)
      expect(r.reason).toMatch(
        /Transfer\(address indexed from, address indexed to, uint256 value\): 16 bytes of data, 32 expected; Transfer\(.*tokenId\): 3 topics, 4 expected/,
      );
  });
});

describe('a verified contract’s events, from the ABI in the contracts dataset', () => {
  it('every Showcase event: columns typed per the ABI, values equal to viem’s decoding', async () => {
    for (const e of SHOWCASE_EVENTS) {
      const ds = `showcase_${e.name.replace(/([a-z])([A-Z])/g, '$1_$2').toLowerCase()}`;
      const api = await logsOf(A_SHOWCASE, e.anonymous ? PING_CHANNEL : toEventSelector(e));
      const rows = await queryCatalog(lake, `SELECT * FROM ${ds}`);
      expect(rows.length, ds).toBe(api.length);
      const plain = e.inputs.filter((p) => !(p.indexed && (p.type === 'string' || p.type === 'bytes' || p.type.endsWith(']') || p.type === 'tuple')));
      const cols = plain.map((p) => asJson(p.type, p.name!.replace(/([a-z])([A-Z])/g, '$1_$2').toLowerCase(), (p as any).components));
      const got = await queryCatalog(lake, `SELECT transaction_hash || '/' || log_index AS k, [${cols.join(', ')}]::VARCHAR[] AS v FROM ${ds}`);
      const byKey = new Map(got.map((r) => [r.k, (r.v as string[]).map((x) => JSON.parse(x))]));
      for (const l of api) {
        if (e.name === 'Tagged') continue; // its indexed values are hashes: checked below
        const d = decodeEventLog({ abi: [e], topics: topicsOf(l) as never, data: l.data, strict: true } as never) as any;
        const want = plain.map((p) => expected(p.type, d.args[p.name!], (p as any).components));
        expect(byKey.get(`${l.transaction_hash.toLowerCase()}/${l.log_index}`), `${ds} ${l.transaction_hash}`).toEqual(want);
      }
    }
    const tagged = await queryCatalog(lake, `SELECT label_hash, blob_hash, ids_hash, value::VARCHAR AS v, value_raw FROM showcase_tagged`);
    expect(tagged.length).toBeGreaterThan(0);
    for (const r of tagged) expect(String(r.label_hash)).toMatch(/^0x[0-9a-f]{64}$/);
    const types = Object.fromEntries((await queryCatalog(lake, 'DESCRIBE showcase_configured')).map((r) => [r.column_name, r.column_type]));
    expect(types).toMatchObject({
      level: 'INTEGER',
      delta: 'INTEGER',
      count: 'BIGINT',
      offset: 'BIGINT',
      total: 'DECIMAL(38,0)',
      total_raw: 'VARCHAR',
      balance: 'DECIMAL(38,0)',
      admin: 'VARCHAR',
      enabled: 'BOOLEAN',
      selector: 'VARCHAR',
      digest: 'VARCHAR',
    });
    const ordered = Object.fromEntries((await queryCatalog(lake, 'DESCRIBE showcase_ordered')).map((r) => [r.column_name, r.column_type]));
    expect(ordered.order).toBe('STRUCT(maker VARCHAR, amount DECIMAL(38,0), filled BOOLEAN)');
    expect(ordered.legs).toBe('STRUCT(leg INTEGER, venue VARCHAR, size DECIMAL(38,0))[]');
    expect(ordered.legs_raw).toBe('VARCHAR');
    expect(ordered.order_id).toBe('VARCHAR');
    const over = await queryCatalog(lake, `SELECT legs_raw FROM showcase_ordered WHERE legs_raw IS NOT NULL LIMIT 1`);
    expect(over.length).toBe(1);
    expect(String(over[0]!.legs_raw)).toMatch(/"size":"\d{39,}"/);
    const filled = await queryCatalog(lake, `SELECT count(DISTINCT "order".filled)::INTEGER AS f, max(len(legs))::INTEGER AS l FROM showcase_ordered`);
    expect(filled[0]).toEqual({ f: 2, l: 2 });
  });
});

describe('re-decoding', () => {
  /** Logs of the ERC-20 Transfer/Approval signatures by shape, counted from event_logs (4 topics and no data: ERC-721). */
  const shapes = async (): Promise<Record<string, number>> => {
    const rows = await queryCatalog(
      lake,
      `SELECT CASE WHEN topic_0 = '${TRANSFER}' THEN 'Transfer' ELSE 'Approval' END || CASE
                WHEN topic_3 IS NOT NULL AND coalesce(data, '0x') = '0x' THEN ' erc721'
                WHEN topic_2 IS NOT NULL AND topic_3 IS NULL AND length(data) = 66 THEN ' erc20' ELSE ' neither' END AS k, count(*)::INTEGER AS n
       FROM event_logs WHERE topic_0 IN ('${TRANSFER}', '${APPROVAL}') GROUP BY 1`,
    );
    return Object.fromEntries(rows.map((r) => [r.k, r.n]));
  };

  it('is idempotent by natural key; with only ERC-20 asked, ERC-721-shaped Transfer and Approval logs are skipped and counted, not rejected', async () => {
    const before = await queryCatalog(
      lake,
      `SELECT (SELECT count(*) FROM erc20_transfer_events)::INTEGER AS a, (SELECT count(*) FROM erc1155_transfer_events)::INTEGER AS b, (SELECT count(*) FROM showcase_listed)::INTEGER AS c`,
    );
    const r = await decodeNow({ standard: ['erc20'], contracts: [{ address: A(A_SHOWCASE), name: 'showcase' }] }, 'decode-test-2');
    const after = await queryCatalog(
      lake,
      `SELECT (SELECT count(*) FROM erc20_transfer_events)::INTEGER AS a, (SELECT count(*) FROM erc1155_transfer_events)::INTEGER AS b, (SELECT count(*) FROM showcase_listed)::INTEGER AS c`,
    );
    expect(after).toEqual(before);
    const dup = await queryCatalog(
      lake,
      `SELECT count(*)::INTEGER AS n FROM (SELECT transaction_hash, log_index FROM erc20_transfer_events GROUP BY ALL HAVING count(*) > 1)`,
    );
    expect(dup[0]!.n).toBe(0);
    const n = await shapes();
    const odd = (await logsOf(A_ODD_ERC20, TRANSFER)).filter((l) => l.topics_count === '4');
    expect(odd.length).toBeGreaterThan(0);
    expect(n['Transfer erc721']).toBeGreaterThan(odd.length); // the ERC-721 collection's and the odd ERC-20's
    expect(r.skipped).toEqual([
      { shape: 'erc721 Approval', logs: n['Approval erc721'] },
      { shape: 'erc721 Transfer', logs: n['Transfer erc721'] },
    ]);
    const rej = await queryCatalog(
      lake,
      `SELECT reason FROM _rejects WHERE "window" LIKE 'decode/%' AND (reason LIKE '%4 topics, 3 expected%' OR (entry->>'address') = '${A(A_ERC721_0)}')`,
    );
    expect(rej).toEqual([]);
  });

  it('with only ERC-721 asked, ERC-20-shaped logs are skipped and counted; a log of neither shape stays a reject', async () => {
    const r = await decodeNow({ standard: ['erc721'], contracts: [] }, 'decode-test-3');
    const n = await shapes();
    expect(n['Transfer erc20']).toBeGreaterThan(0);
    expect(r.skipped).toEqual([
      { shape: 'erc20 Approval', logs: n['Approval erc20'] },
      { shape: 'erc20 Transfer', logs: n['Transfer erc20'] },
    ]);
    const short = (await logsOf(A_ODD_ERC20, TRANSFER)).filter((l) => l.topics_count === '3' && l.data.length !== 66);
    expect(short.length).toBe(n['Transfer neither']);
    const rej = await queryCatalog(lake, `SELECT reason, entry->>'transaction_hash' AS tx FROM _rejects WHERE dataset = 'erc721_transfer_events'`);
    expect(rej.map((x) => x.tx).sort()).toEqual(short.map((l) => l.transaction_hash.toLowerCase()).sort());
    for (const x of rej) expect(x.reason).toMatch(/^Transfer\(.*tokenId\): 3 topics, 4 expected$/);
    expect(r.rejects).toBe(short.length);
  });

  it('replaces its _rejects rows (on another day too) and leaves the rejects of fetching as they are', async () => {
    // The datasets whose logs are rejected here (the odd ERC-20's short Transfers, under both standards' Transfer
    // datasets): every decode reject of the tests above is one of theirs. The Showcase's and ERC-1155's datasets
    // reject nothing and cost most of a decoding, three times over.
    const all = { standard: ['erc20', 'erc721'], contracts: [] };
    const decodeRejects = (): Promise<Record<string, unknown>[]> =>
      queryCatalog(
        lake,
        `SELECT dataset, "window", field, raw_value, reason, entry::VARCHAR AS entry FROM _rejects WHERE "window" LIKE 'decode/%' ORDER BY ALL`,
      );
    // A decoding on an earlier day: its rejects are that day's, and replace today's of the tests above.
    const first = await decodeNow(all, 'decode-test-4', '2026-01-02T03:04:05.000Z');
    const once = await decodeRejects();
    expect(first.rejects).toBeGreaterThan(0);
    expect(once.length).toBe(first.rejects);
    // A fetch reject that day, of the same log as a decode reject: not the decoding's to replace.
    const log = JSON.parse(String(once[0]!.entry));
    const paths = new LakePaths(lake);
    const staging = paths.staging('fetch-rejects');
    await mkdir(staging, { recursive: true });
    const file = path.join(staging, 'rejects.ndjson');
    const fetchReject = {
      dataset: 'event_logs',
      network: 'mainnet',
      window: 'event_logs/mainnet/all/0-3500',
      field: 'data',
      raw_value: '"0xzz"',
      reason: 'not hex',
    };
    await writeFile(file, JSON.stringify({ ...fetchReject, entry: JSON.stringify(log) }) + '\n');
    const engine = await openEngine({ tempDir: path.join(staging, 'tmp') });
    try {
      const at = '2026-01-02T05:00:00.000Z';
      await commitRun({
        engine,
        paths,
        runId: 'fetch-rejects',
        ingestedAt: at,
        stagingDir: path.join(staging, 'batch-0'),
        network: 'mainnet',
        datasets: [],
        rejectFiles: [file],
        windows: [],
        watermarks: [],
        run: () => ({ job: 'fetch-rejects', startedAt: at, finishedAt: at, status: 'complete', report: {} }),
      });
    } finally {
      engine.close();
    }
    const fetched = `SELECT dataset, "window", _run_id, run_date::VARCHAR AS d, entry->>'transaction_hash' AS tx FROM _rejects WHERE "window" NOT LIKE 'decode/%'`;
    const kept = [{ dataset: 'event_logs', window: fetchReject.window, _run_id: 'fetch-rejects', d: '2026-01-02', tx: log.transaction_hash }];
    expect(await queryCatalog(lake, fetched)).toEqual(kept);

    // Today, twice: the same rejects, each time the latest decoding's, in its day only.
    for (const runId of ['decode-test-5', 'decode-test-6']) {
      const r = await decodeNow(all, runId);
      expect(r.rejects).toBe(first.rejects);
      expect(await decodeRejects()).toEqual(once);
      const where = await queryCatalog(lake, `SELECT DISTINCT _run_id, run_date::VARCHAR AS d FROM _rejects WHERE "window" LIKE 'decode/%'`);
      expect(where).toEqual([{ _run_id: runId, d: new Date().toISOString().slice(0, 10) }]);
      expect(await queryCatalog(lake, fetched)).toEqual(kept);
    }
  });
});

describe('in the export run', () => {
  it('decodes the logs the run wrote; a contract’s ABI not in the lake comes from the API (#14)', async () => {
    const { dir, cleanup: done } = await tempDir();
    try {
      const configured = SHOWCASE_EVENTS.find((e) => e.name === 'Configured')!;
      const job = parseJob(
        {
          name: 'decode-in-run',
          target: 'simulator',
          lake: dir,
          range: { fromBlock: 0, toBlock: 2000 },
          datasets: { event_logs: { contracts: [{ address: A(A_SHOWCASE), topics: [toEventSelector(configured)] }] } },
          decode: { contracts: [{ address: A(A_SHOWCASE), name: 'fromapi', events: ['Configured'] }] },
        },
        'decode-in-run',
        process.env,
      );
      const r = await runJob(job, { simulator: sim });
      expect(r.errors).toEqual([]);
      const logs = await logsOf(A_SHOWCASE, toEventSelector(configured)).then((l) => l.filter((x) => Date.parse(x.timestamp) > 0));
      expect(r.decoded?.datasets).toEqual([{ name: 'fromapi_configured', rows: expect.any(Number), partitions: expect.any(Number) }]);
      const n = await queryCatalog(dir, 'SELECT count(*)::INTEGER AS n FROM fromapi_configured');
      expect(n[0]!.n).toBe(r.decoded!.datasets[0]!.rows);
      expect(n[0]!.n).toBeGreaterThan(0);
      expect(n[0]!.n).toBeLessThan(logs.length); // only the run's blocks (0-2000), not the test's 0-3500
    } finally {
      await done();
    }
  }, 120_000);
});
