import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { runCli, runCliCapturing, runCliInProcess, type CliResult } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';
import { listLake, runWriter } from '../load/helpers.js';
import { fingerprint } from './fingerprint.js';
import { queryLake } from '../../src/cli/commands/query.js';
import { demoDoc, writeJobFile } from './helpers.js';
import { startProxy, type Proxy } from './proxy.js';

/**
 * Security: an API key never leaks (stdout, stderr, JSON logs, reports, the catalog, error messages,
 * Parquet, staging leftovers — each searched), job values cannot put files outside the lake, and
 * `chainlake query` cannot change the lake.
 */
const CANARY = 'ck-CANARY-5f1d3a9e7b2c4d60';
const WRONG = 'ck-WRONGKEY-91ab7c3e0d5f';
const IN_JOB = 'ck-JOBFILE-2e8f6a4c1b9d';
const secrets = [CANARY, WRONG, IN_JOB];

let sim: RunningSimulator;
let proxy: Proxy;
let dir: string;
let cleanup: () => Promise<void>;
const outputs: { what: string; text: string }[] = [];
const A = '0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c';
const B = '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157';
const NO_SUCH_TX = '0x' + 'ab'.repeat(32);

beforeAll(async () => {
  sim = await startSimulator({ seed: 1, scale: 'small', apiKey: CANARY });
  proxy = await startProxy(sim);
  ({ dir, cleanup } = await tempDir('chainlake-security-'));
});
afterAll(async () => {
  await proxy?.close();
  await sim?.close();
  await cleanup?.();
});

const cli = async (what: string, args: string[], key: string | undefined = CANARY, extra: NodeJS.ProcessEnv = {}): Promise<CliResult> => {
  const r = await runCli(args, { env: { CHAINLAKE_API_KEY: key ?? '', ...extra } });
  outputs.push({ what: `${what} stdout`, text: r.stdout }, { what: `${what} stderr`, text: r.stderr });
  return r;
};

/**
 * The same command in this process (the parser the bin runs, every byte it writes, the exit code it would set), with
 * the key in the environment for the call: for readers and refusals, whose process start is not what is searched.
 */
const inProcess = async (what: string, args: string[]): Promise<CliResult> => {
  const r = await runCliCapturing(args, { CHAINLAKE_API_KEY: CANARY });
  outputs.push({ what: `${what} stdout`, text: r.stdout }, { what: `${what} stderr`, text: r.stderr });
  return r;
};

function jobDoc(lake: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name: 'secure',
    target: 'api',
    endpoints: { mainnet: sim.urls.mainnet, finance: sim.urls.finance },
    lake,
    range: { fromBlock: 0, toBlock: 30_000 },
    commit: { everyRows: 500 },
    datasets: {
      transactions: { addresses: [A, B] },
      erc20_transfers: { addresses: [A] },
      // A hash the chain does not have: a recorded absence (found = false), asked with the key like any other.
      transaction_status: { transactions: [NO_SUCH_TX] },
      // A block above the head: a window that fails, so error messages (with URLs) are produced.
      blocks: { blocks: [99_999_999] },
      balances: { addresses: [A, B] },
      pool_info: { pools: [sim.examples.pools[0]] },
    },
    ...extra,
  };
}

/** Every readable text of a lake: each file's bytes, every Parquet file's rows, every catalog table and view. */
async function lakeTexts(lake: string): Promise<{ what: string; text: string }[]> {
  const out: { what: string; text: string }[] = [];
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  const rows = async (sql: string) => JSON.stringify((await conn.runAndReadAll(sql)).getRowObjectsJson());
  try {
    for (const f of await listLake(lake)) {
      const abs = path.join(lake, f);
      out.push({ what: `${f} (bytes)`, text: (await readFile(abs)).toString('latin1') });
      if (f.endsWith('.parquet')) out.push({ what: `${f} (rows)`, text: await rows(`SELECT * FROM read_parquet('${abs.replace(/'/g, "''")}')`) });
      if (f.endsWith('.ndjson') || f.endsWith('.json')) out.push({ what: f, text: await readFile(abs, 'utf8') });
    }
    if ((await listLake(lake)).includes('catalog.duckdb')) {
      await conn.run(`ATTACH '${path.join(lake, 'catalog.duckdb')}' AS cat (READ_ONLY)`);
      const tables = (
        await conn.runAndReadAll(
          `SELECT table_name, 'table' AS k FROM duckdb_tables() WHERE database_name = 'cat' UNION ALL SELECT view_name, 'view' FROM duckdb_views() WHERE database_name = 'cat' AND NOT internal`,
        )
      ).getRowsJS();
      expect(tables.length).toBeGreaterThan(20);
      for (const [t] of tables) out.push({ what: `catalog ${String(t)}`, text: await rows(`SELECT * FROM cat."${String(t)}"`) });
      out.push({
        what: 'catalog DDL',
        text: await rows(`SELECT sql FROM duckdb_views() WHERE database_name = 'cat' UNION ALL SELECT sql FROM duckdb_tables() WHERE database_name = 'cat'`),
      });
      await conn.run('DETACH cat');
    }
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
  return out;
}

/** Where a secret (or a recognisable piece of one) appears. */
function leaks(texts: { what: string; text: string }[]): string[] {
  const found: string[] = [];
  for (const s of secrets) {
    const pieces = [s, s.slice(3, 19), s.slice(-12)];
    for (const t of texts) for (const p of pieces) if (t.text.includes(p)) found.push(`${t.what} holds ${p}`);
  }
  return found;
}

describe('the API key never leaks', () => {
  it('not in stdout, stderr, JSON logs, reports, error messages, the catalog, Parquet or staging leftovers', async () => {
    const lake = path.join(dir, 'lake');
    const report = path.join(dir, 'report.json');
    const job = await writeJobFile(path.join(dir, 'secure.json'), jobDoc(lake));

    // 1. A run with a failing window (error messages with URLs), every log line, a report.
    const r1 = await cli('run', ['run', job, '--log-format', 'json', '--verbose', '--report', report]);
    expect(r1.code, r1.stderr).toBe(1);
    expect(r1.stderr).toMatch(/blocks.*url=http:\/\/127\.0\.0\.1/);
    outputs.push({ what: 'report file', text: await readFile(report, 'utf8') });
    // The key reached the API (the other windows loaded).
    expect((await fingerprint(lake)).transactions!.rows).toBeGreaterThan(100);

    // 2. A wrong key: the API refuses it (401), the run says so without echoing the key.
    const r2 = await cli('wrong key', ['run', job, '--log-format', 'json', '--verbose', '--full-refresh', '--report', report], WRONG);
    expect(r2.code).toBe(2); // a refused key is for a person to fix
    expect(r2.stderr).toMatch(/HTTP 40[13].*(api-key|unauthori[sz]ed)/i);
    outputs.push({ what: 'report file (wrong key)', text: await readFile(report, 'utf8') });

    // 3. The key in the job file instead of the environment; text logs this time.
    const inJob = await writeJobFile(path.join(dir, 'in-job.json'), jobDoc(lake, { apiKey: IN_JOB }));
    const r3 = await cli('key in job', ['run', inJob, '--verbose', '--full-refresh'], undefined);
    expect(r3.code).toBe(2); // the simulator knows only CANARY: refused, as above

    // 4. A run killed right after deciding a batch commit: its staging (rows, journal) stays for the search.
    const killed = await runWriter(['run', job, '--full-refresh', '--log-format', 'json'], { apiKey: CANARY, crash: 'journal' });
    expect(killed.signal).toBe('SIGKILL');
    outputs.push({ what: 'killed stderr', text: killed.stderr }, { what: 'killed stdout', text: killed.stdout });
    const staged = await listLake(lake);
    expect(staged.some((f) => f.startsWith('_staging/') && f.endsWith('.ndjson'))).toBe(true);
    const stagingTexts = await lakeTexts(lake);

    // 5. Readers: status and query (which also finish the killed commit first).
    expect((await inProcess('status', ['status', '--lake', lake, '--format', 'json'])).code).toBe(0);
    expect((await inProcess('query', ['query', '--lake', lake, '--format', 'json', 'SELECT * FROM runs'])).stdout).toMatch(/run_id/);
    expect((await inProcess('query windows', ['query', '--lake', lake, '--format', 'json', 'SELECT * FROM windows'])).stdout).toMatch(/scope/);

    const all = [...outputs, ...stagingTexts, ...(await lakeTexts(lake))];
    expect(leaks([{ what: 'the search itself', text: `x${CANARY}y` }])).toHaveLength(3); // the search can find one
    expect(all.length).toBeGreaterThan(50);
    expect(leaks(all)).toEqual([]);
    console.log(
      `reliability/security: 3 keys searched in ${all.length} texts (outputs, reports, ${staged.length} lake files incl. staging, catalog tables): none found`,
    );
  });
});

describe('job values cannot place files outside the lake', () => {
  const base = () => jobDoc(path.join(dir, 'paths', 'lake'), { datasets: { transactions: { addresses: [A] } } });
  const escapes: [string, (d: Record<string, unknown>) => void, RegExp][] = [
    ['a job name with ..', (d) => (d.name = '../../escaped'), /name: may hold letters, digits/],
    ['a job name with a separator', (d) => (d.name = 'nightly/escaped'), /name: may hold letters, digits/],
    ['a job name with a backslash', (d) => (d.name = 'nightly\\..\\escaped'), /name: may hold letters, digits/],
    ['a job name that is ..', (d) => (d.name = '..'), /name: may hold letters, digits/],
    ['a dataset name with ..', (d) => (d.datasets = { '../transactions': { addresses: [A] } }), /unknown dataset/],
    ['a dataset name with a separator', (d) => (d.datasets = { 'transactions/../../x': { addresses: [A] } }), /unknown dataset/],
    ['an address with ..', (d) => (d.datasets = { transactions: { addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d/../..'] } }), /not an address/],
    [
      'a transaction hash with a separator',
      (d) => (d.datasets = { transaction_status: { transactions: ['0x' + 'a'.repeat(30) + '/../../' + 'b'.repeat(27)] } }),
      /not a transaction hash/,
    ],
    ['a block with ..', (d) => (d.datasets = { blocks: { blocks: ['../1'] } }), /must be a block number or a "from-to" range/],
    ['a chart unit with ..', (d) => (d.datasets = { stable_chart: { charts: [{ unit: '../../x', unit_count: 2 }] } }), /unit: must be one of/],
    ['a pid with ..', (d) => (d.datasets = { staking_info: { pids: ['../0'] } }), /pids\[0\]: must be an integer/],
    ['a topic with ..', (d) => (d.datasets = { event_logs: { contracts: [A], topics: ['../' + 'a'.repeat(61)] } }), /not a topic/],
    ['a network with ..', (d) => (d.network = '../mainnet'), /network: must be one of mainnet, testnet/],
    ['a list file that is not a list', (d) => (d.datasets = { transactions: { addresses: { file: '/etc/hostname' } } }), /not an address/],
  ];
  it.each(escapes)('%s: exit 2, nothing written anywhere', async (_name, change, message) => {
    const root = path.join(dir, 'paths');
    await mkdir(root, { recursive: true });
    const before = (await readdir(root)).sort();
    const d = base();
    change(d);
    // In this process: the job file is refused before any command runs (a process each would only add its start).
    const r = await runCliInProcess(['run', await writeJobFile(path.join(dir, 'escape.json'), d)]);
    expect(r.stderr).toMatch(message);
    expect(r.code, r.stderr).toBe(2);
    expect((await readdir(root)).sort()).toEqual(before);
  });

  it('scope values never become file names: every file a run writes (staging included) is inside the lake and named by dataset, network, date or a counter', async () => {
    // The demo job: every scope kind of both APIs. Killed right after deciding a commit, so its staging is
    // there to inspect; then finished by the next command.
    const doc = await demoDoc();
    const lake = path.join(dir, 'names', 'lake');
    doc.lake = lake;
    doc.commit = { everyRows: 5000 };
    const job = await writeJobFile(path.join(dir, 'names.json'), doc);
    const killed = await runWriter(['run', job, '-q'], { apiKey: '', crash: 'journal' });
    expect(killed.signal).toBe('SIGKILL');
    const files = await listLake(lake);
    const scopeValues = JSON.stringify(doc.datasets).match(/0x[0-9a-fA-F]{40,64}/g)!;
    expect(scopeValues.length).toBeGreaterThan(30);
    const named =
      /^(catalog\.duckdb(\.wal)?|\.chainlake\.lock|[a-z0-9_]+\/network=(mainnet|testnet)\/(block|snapshot|point|run)_date=\d{4}-\d{2}-\d{2}\/data\.parquet|_staging\/\d{8}T\d{6}Z-[0-9a-f]{6}\/[A-Za-z0-9_./=-]+)$/;
    expect(files.filter((f) => !named.test(f) || f.split('/').includes('..'))).toEqual([]);
    expect(files.filter((f) => scopeValues.some((v) => f.toLowerCase().includes(v.toLowerCase().slice(2, 12))))).toEqual([]);
    expect(files.some((f) => f.startsWith('_staging/'))).toBe(true);
    expect(await readdir(path.join(dir, 'names'))).toEqual(['lake']);
  });

  it('values from the API that reach partition names (timestamps) cannot escape either: such rows are rejects', async () => {
    const lake = path.join(dir, 'api-paths', 'lake');
    proxy.setRewrite((url, status, body) => {
      if (status !== 200 || !url.pathname.endsWith('/transactions')) return undefined;
      const b = JSON.parse(body) as { results?: { data?: Record<string, unknown>[] } };
      const data = b.results?.data ?? [];
      if (data.length < 3) return undefined;
      data[0]!.timestamp = '../../../../escaped';
      data[1]!.timestamp = '2024-03-01T00:00:00Z/../../../escaped';
      data[2]!.timestamp = '2024-03-01/../../x';
      return { body: JSON.stringify(b) };
    });
    try {
      const d = jobDoc(lake, { endpoints: { mainnet: proxy.urls.mainnet }, datasets: { transactions: { addresses: [A] } } });
      const r = await inProcess('api paths', ['run', await writeJobFile(path.join(dir, 'api-paths.json'), d), '-q']);
      expect(r.code, r.stderr).toBe(0);
    } finally {
      proxy.setRewrite(undefined);
    }
    const files = await listLake(lake);
    expect(files.filter((f) => f.includes('..') || f.includes('escaped'))).toEqual([]);
    expect(await readdir(path.join(dir, 'api-paths'))).toEqual(['lake']);
    const print = await fingerprint(lake);
    expect(print._rejects!.rows).toBeGreaterThanOrEqual(3);
  });
});

describe('chainlake query cannot change the lake', () => {
  it('CREATE, INSERT, UPDATE, DELETE, DROP, ALTER, COPY TO, EXPORT fail (exit 2); the catalog and the lake are byte for byte as before', async () => {
    const lake = path.join(dir, 'ro-query');
    const job = await writeJobFile(path.join(dir, 'ro-query.json'), jobDoc(lake, { datasets: { transactions: { addresses: [A] } } }));
    expect((await inProcess('ro setup', ['run', job, '-q'])).code).toBe(0);
    const digest = async () => {
      const h = createHash('sha256');
      for (const f of await listLake(lake)) h.update(f).update(await readFile(path.join(lake, f)));
      return h.digest('hex');
    };
    const before = await digest();
    const outside = path.join(dir, 'exported.csv');
    const statements = [
      'CREATE TABLE evil AS SELECT 1',
      'CREATE VIEW evil AS SELECT 1',
      "INSERT INTO runs (run_id, job, status) VALUES ('x', 'y', 'complete')",
      'UPDATE watermarks SET block = 0',
      'DELETE FROM runs',
      'DROP VIEW transactions',
      'DROP TABLE runs',
      'ALTER TABLE runs ADD COLUMN evil INT',
      `COPY (SELECT * FROM transactions) TO '${outside}'`,
      `COPY (SELECT 1) TO '${path.join(lake, 'transactions', 'stray.parquet')}' (FORMAT parquet)`,
      `EXPORT DATABASE '${path.join(dir, 'exported-db')}'`,
      'SELECT 1; DROP VIEW transactions',
      'CHECKPOINT; DELETE FROM runs',
    ];
    // Through the CLI for a few (any refusal is the same exit 2 there), the rest through the library's reader,
    // which is what refuses them (a process each would only add DuckDB's start-up).
    const throughCli = new Set([statements[0], statements[5], statements[11]]);
    for (const sql of statements) {
      if (throughCli.has(sql)) {
        const r = await inProcess('ro query', ['query', '--lake', lake, sql]);
        expect(r.code, `${sql}: ${r.stdout}`).toBe(2);
        expect(r.stderr, sql).toMatch(/query failed: .*read-only|query is read-only/);
      } else {
        await expect(queryLake(lake, sql, 'csv'), sql).rejects.toThrow(/read-only/);
      }
    }
    expect(await digest()).toBe(before);
    expect(await readdir(dir)).not.toContain('exported.csv');
    const ok = await inProcess('ro query ok', ['query', '--lake', lake, '--format', 'json', 'SELECT count(*)::INT AS n FROM transactions']);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout).n).toBeGreaterThan(0);
  });
});
