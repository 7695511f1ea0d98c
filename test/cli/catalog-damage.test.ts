import { spawn } from 'node:child_process';
import { cp, open, readdir, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalogProblem } from '../../src/load/write/salvage.js';
import { LakePaths } from '../../src/load/paths.js';
import { Catalog } from '../../src/load/catalog.js';
import { RECONCILIATION_TABLE } from '../../src/load/read/reconcile.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { CLI, runCliCapturing, type CliResult } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let lake: string;
let rows: number;

const HISTORY = ['declared_tables', 'runs', 'windows', 'watermarks', 'commits', 'request_usage', 'requests', 'verifications'];
/** How the rebuild names each table it lost (src/load/write/salvage.ts). */
const LOST_AS: Record<string, string> = {
  declared_tables: 'declarations of decoded and reconciliation tables',
  runs: 'run history',
  windows: 'window records',
  watermarks: 'watermarks',
  commits: 'commit log',
  request_usage: 'daily request usage',
  requests: 'request lineage',
  verifications: 'verification history',
};
/** Rows of each history table before any damage. */
const before: Record<string, number> = {};

/**
 * A command in this process, the simulator's URL and key in the environment: what each command says and the exit
 * code it sets are the point, its process is not (the pipe below is, so that one runs the built CLI).
 */
async function cli(args: string[]): Promise<CliResult> {
  return runCliCapturing(args, { CHAINLAKE_MAINNET_URL: sim.urls.mainnet, CHAINLAKE_API_KEY: sim.apiKey });
}

beforeAll(async () => {
  sim = await startSimulator({ seed: 7 });
  ({ dir, cleanup } = await tempDir());
  lake = path.join(dir, 'lake');
  for (const a of sim.examples.addresses.slice(0, 2)) {
    const r = await cli(['export', 'transactions', '--address', a, '--lake', lake, '-q']);
    expect(r.code, r.stderr).toBe(0);
  }
  rows = Number(JSON.parse((await cli(['query', '--lake', lake, '--format', 'json', 'SELECT count(*)::INT AS n FROM transactions'])).stdout).n);
  expect(rows).toBeGreaterThan(100);
  // A verify of the lake, so that its catalog holds verifications too.
  const job = path.join(dir, 'verify.json');
  await writeFile(job, JSON.stringify({ name: 'verify', lake, datasets: { transactions: { addresses: sim.examples.addresses.slice(0, 2) } } }));
  // Every check holds: the rows of the exports' provisional windows (near the head) lie inside those windows.
  const v = await cli(['verify', job, '-q']);
  expect(v.code, v.stdout + v.stderr).toBe(0);
  // A declared table (as `reconcile` declares its own), so that the catalog holds a declaration to keep.
  await Catalog.write(new LakePaths(lake), (c) => c.registerTables([RECONCILIATION_TABLE]));
  for (const t of HISTORY) {
    const q = await cli(['query', '--lake', lake, '--format', 'json', `SELECT count(*)::INT AS n FROM ${t}`]);
    before[t] = Number(JSON.parse(q.stdout).n);
  }
  expect(before.verifications).toBeGreaterThan(0);
  expect(before.declared_tables).toBe(1);
}, 300_000);
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

async function copyLake(name: string): Promise<string> {
  const to = path.join(dir, name);
  await cp(lake, to, { recursive: true });
  return to;
}

async function overwrite(file: string, at: number, length: number): Promise<void> {
  const fh = await open(file, 'r+');
  try {
    await fh.write(Buffer.alloc(length, 0xa5), 0, length, at);
  } finally {
    await fh.close();
  }
}

/** After a rebuild the lake answers again, with every row, and `status` works. */
async function answersAgain(at: string): Promise<void> {
  const st = await cli(['status', '--lake', at]);
  expect(st.code, st.stderr).toBe(0);
  const q = await cli(['query', '--lake', at, '--format', 'json', 'SELECT count(*)::INT AS n FROM transactions']);
  expect(q.code, q.stderr).toBe(0);
  expect(JSON.parse(q.stdout)).toEqual({ n: rows });
}

// Hang guard, not a speed expectation: each step opens DuckDB lakes on a shared machine.
describe('a damaged or missing catalog.duckdb', { timeout: 300_000 }, () => {
  it('every command says to run `catalog rebuild`; the rebuild keeps what reads and names what was lost', async () => {
    // Damage one block of the catalog: the first 256 KiB block whose damage DuckDB notices (checksums are per block).
    const size = (await stat(path.join(lake, 'catalog.duckdb'))).size;
    let at: string | undefined;
    for (let offset = 12_288 + 1000, i = 0; offset < size && !at; offset += 262_144, i++) {
      const candidate = await copyLake(`damaged-${i}`);
      await overwrite(path.join(candidate, 'catalog.duckdb'), offset, 4096);
      if (await catalogProblem(new LakePaths(candidate))) at = candidate;
      else await rm(candidate, { recursive: true });
    }
    expect(at, 'no block damage was noticed').toBeDefined();
    const lakeAt = at!;
    for (const cmd of [['status'], ['query', 'SELECT count(*) FROM runs'], ['compact']]) {
      const r = await cli([...cmd, '--lake', lakeAt]);
      if (r.code === 0) continue; // the damaged block is not one this command reads
      expect(r.code, cmd[0]).toBe(2);
      expect(r.stderr, cmd[0]).toMatch(/catalog\.duckdb is damaged[\s\S]*hint: run `chainlake catalog rebuild --lake /);
    }
    const rb = await cli(['catalog', 'rebuild', '--lake', lakeAt]);
    expect(rb.code, rb.stderr).toBe(0);
    expect(rb.stdout).toMatch(/catalog\.duckdb was damaged \(.*\); it was moved to .*catalog\.duckdb\.damaged-\d{8}T\d{6}Z/);
    // Each table of the history is either kept (with every row it had) or named as lost.
    for (const t of HISTORY) {
      const kept = new RegExp(`kept: .*\\b${t} \\((\\d+) rows\\)`).exec(rb.stdout);
      const lost = rb.stdout.includes(`lost: the ${LOST_AS[t]}`);
      expect((kept !== null) !== lost, `${t}: ${rb.stdout}`).toBe(true);
      if (kept && t !== 'commits' && t !== 'runs') expect(Number(kept[1]), t).toBe(before[t]);
    }
    expect((await readdir(lakeAt)).some((f) => f.startsWith('catalog.duckdb.damaged-'))).toBe(true);
    await answersAgain(lakeAt);
  });

  it('an unreadable or deleted catalog: everything is lost but the data, and the rebuild says so', async () => {
    const garbled = await copyLake('garbled');
    await overwrite(path.join(garbled, 'catalog.duckdb'), 0, 8192);
    const st = await cli(['status', '--lake', garbled]);
    expect(st.code).toBe(2);
    expect(st.stderr).toMatch(/not a valid DuckDB database file[\s\S]*hint: run `chainlake catalog rebuild --lake /);
    const rb = await cli(['catalog', 'rebuild', '--lake', garbled]);
    expect(rb.code, rb.stderr).toBe(0);
    expect(rb.stdout).toMatch(/lost: the run history/);
    expect(rb.stdout).toMatch(/lost: the watermarks \(the next incremental runs start from the job's fromBlock/);
    await answersAgain(garbled);

    const deleted = await copyLake('deleted');
    await rm(path.join(deleted, 'catalog.duckdb'));
    const q = await cli(['query', '--lake', deleted, 'SELECT 1']);
    expect(q.code).toBe(2);
    expect(q.stderr).toMatch(/catalog rebuild/);
    const rb2 = await cli(['catalog', 'rebuild', '--lake', deleted]);
    expect(rb2.code, rb2.stderr).toBe(0);
    expect(rb2.stdout).toMatch(/no catalog\.duckdb at .*: a new one was created from the lake's files/);
    await answersAgain(deleted);
  });

  it('output into a pipe that closes early (`| head`) ends quietly with exit 0', async () => {
    const child = spawn(process.execPath, [CLI, 'query', '--lake', lake, '--format', 'csv', 'SELECT * FROM transactions, range(20)'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    // Like `head -1`: read the first chunk, then close the pipe while the writer still has rows to write.
    child.stdout.once('data', () => child.stdout.destroy());
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('close', (c, s) => resolve([c, s])));
    clearTimeout(timer);
    expect(signal).toBeNull();
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});
