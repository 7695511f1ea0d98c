import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { DuckDBInstance } from '@duckdb/node-api';
import { DATASETS } from '../../src/datasets/registry.js';
import { REJECTS_SHAPE, datasetShape, type TableShape } from '../../src/load/schema.js';
import type { RunningSimulator } from '../../src/simulator/index.js';
import { CLI, type CliResult } from '../helpers/cli.js';
import { queryCatalog } from '../helpers/lake.js';

/** Every table a lake can hold (registry datasets and the rejects log). */
export const shapes = (): TableShape[] => [...Object.values(DATASETS).map(datasetShape), REJECTS_SHAPE];

/** A job file that fetches transactions of `addresses` from the test's simulator into `lake`. */
export async function writeJob(file: string, sim: RunningSimulator, lake: string, addresses: string[], extra: Record<string, unknown> = {}): Promise<string> {
  const job = {
    name: path.basename(file, '.json'),
    network: 'mainnet',
    target: 'api',
    endpoints: { mainnet: sim.urls.mainnet },
    lake,
    concurrency: 4,
    datasets: { transactions: { addresses } },
    ...extra,
    // The simulator's head is final (a real API's default depth would make the newest windows provisional).
    range: { finalityDepth: 0, ...(extra.range as Record<string, unknown> | undefined) },
  };
  await writeFile(file, JSON.stringify(job, null, 2));
  return file;
}

export interface Writer {
  child: ChildProcess;
  /** Resolves when the child reaches the hold step (CHAINLAKE_TEST_HOLD_AT). */
  held: Promise<string>;
  /**
   * With several hold steps (`hold: 'journal,rename'`): each call resolves with the next step the child holds at,
   * in order (the first call, with the step `held` resolves with); rejects if the child exits before it.
   */
  nextHeld(): Promise<string>;
  release(): void;
  done: Promise<CliResult>;
}

/**
 * Starts `chainlake <args>` as a child process. With `hold`, the child stops at that commit step until
 * `release()` (test hooks in src/load/test-hooks.ts); `crash` makes it SIGKILL itself at a step.
 */
export function startWriter(args: string[], opts: { apiKey: string; hold?: string; crash?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }): Writer {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: {
      ...process.env,
      CHAINLAKE_API_KEY: opts.apiKey,
      CHAINLAKE_TEST_HOLD_AT: opts.hold ?? '',
      CHAINLAKE_TEST_CRASH_AT: opts.crash ?? '',
      CHAINLAKE_CATALOG_WAIT_MS: '30000',
      ...opts.env,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
  // Each hold line, in order; the waiters for holds not yet seen, by index.
  const holds: string[] = [];
  const waiters: { index: number; resolve: (step: string) => void; reject: (e: Error) => void }[] = [];
  let closed = false;
  const rl = createInterface({ input: child.stderr! });
  rl.on('line', (line) => {
    stderr += line + '\n';
    const m = /^chainlake-test-hold (\S+)/.exec(line);
    if (!m) return;
    holds.push(m[1]!);
    for (const w of waiters.filter((x) => x.index === holds.length - 1)) w.resolve(m[1]!);
  });
  child.on('close', () => {
    closed = true;
    for (const w of waiters.splice(0)) w.reject(new Error(`writer exited before holding: ${stderr}`));
  });
  /** The step of the child's hold number `index` (0: its first). */
  const holdAt = (index: number): Promise<string> => {
    if (index < holds.length) return Promise.resolve(holds[index]!);
    if (closed) return Promise.reject(new Error(`writer exited before holding: ${stderr}`));
    return new Promise<string>((resolve, reject) => waiters.push({ index, resolve, reject }));
  };
  let taken = 0;
  const nextHeld = (): Promise<string> => holdAt(taken++);
  const held = holdAt(0);
  held.catch(() => undefined);
  const done = new Promise<CliResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
  return { child, held, nextHeld, release: () => child.stdin!.write('go\n'), done };
}

/** Runs the CLI to completion (optionally crashing at a step) and returns what it did. */
export function runWriter(args: string[], opts: { apiKey: string; crash?: string; env?: NodeJS.ProcessEnv }): Promise<CliResult> {
  const w = startWriter(args, opts);
  w.child.stdin!.end();
  return w.done;
}

/** A throwaway in-memory DuckDB for the test's own independent reads of Parquet files. */
export async function withDuck<T>(fn: (q: (sql: string) => Promise<Record<string, unknown>[]>) => Promise<T>): Promise<T> {
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  try {
    await conn.run("SET TimeZone = 'UTC'");
    return await fn(async (sql) => (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[]);
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
}

/** Every file under the lake, relative, sorted (to find orphans and temp files). */
export async function listLake(lake: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) await walk(p);
      else out.push(path.relative(lake, p));
    }
  };
  await walk(lake);
  return out.sort();
}

const sqlStr = (s: string): string => `'${s.replace(/'/g, "''")}'`;

/**
 * The content of a lake read straight from its files (not through the catalog): per table, every row
 * without the run columns, ordered by key — what "the same lake" means. Also counts duplicates by key.
 */
export async function lakeContent(lake: string): Promise<Record<string, { rows: number; duplicates: number; data: string }>> {
  const out: Record<string, { rows: number; duplicates: number; data: string }> = {};
  // The files of the newest snapshot: older snapshots' files stay on disk until `maintain` expires them.
  const current = (await catalogFiles(lake)).map((f) => f.path);
  await withDuck(async (q) => {
    for (const s of shapes()) {
      const files = current.filter((f) => f.startsWith(`main/${s.name}/`));
      if (files.length === 0) continue;
      const src = `read_parquet([${files.map((f) => sqlStr(path.join(lake, f))).join(', ')}], union_by_name = true)`;
      const key = s.key.map((k) => `"${k}"`).join(', ');
      const [c] = await q(`SELECT count(*)::BIGINT AS n, (count(*) - count(DISTINCT (${key})))::BIGINT AS d FROM ${src}`);
      const rows = await q(`SELECT * EXCLUDE (_run_id, _ingested_at) FROM ${src} ORDER BY ${key}`);
      out[s.name] = {
        rows: Number(c!.n),
        duplicates: Number(c!.d),
        data: JSON.stringify(rows, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)),
      };
    }
  });
  return out;
}

/** The catalog's `files` table, by path: what assertClean compares with the disk. */
export async function catalogFiles(lake: string): Promise<{ path: string; rows: number; bytes: number }[]> {
  const rows = await queryCatalog(lake, 'SELECT path, rows::BIGINT AS rows, bytes::BIGINT AS bytes FROM files ORDER BY path');
  return rows.map((f) => ({ path: String(f.path), rows: Number(f.rows), bytes: Number(f.bytes) }));
}

/**
 * The lake holds nothing but committed state: no staging left, no lock, no temp file, every Parquet file a
 * DuckLake data file some snapshot lists, and the catalog's `files` view (the newest snapshot) describes files
 * that are on disk.
 */
export async function assertClean(lake: string, catalogFiles: { path: string; rows: number; bytes: number }[]): Promise<string[]> {
  const problems: string[] = [];
  const all = await listLake(lake);
  for (const f of all) {
    if (f === 'catalog.duckdb') continue;
    if (f.startsWith('_staging/')) problems.push(`staging left: ${f}`);
    else if (f === '.chainlake.lock') problems.push('lock left');
    else if (!/^main\/[^/]+\/network=[^/]+\/[a-z_]+=\d{4}-\d{2}-\d{2}\/ducklake-[0-9a-f-]+\.parquet$/.test(f)) problems.push(`unexpected file: ${f}`);
  }
  const data = new Set(all.filter((f) => f.endsWith('.parquet')));
  const listed = new Set(
    (
      await queryCatalog(
        lake,
        'SELECT sc.path || t.path || d.path AS path FROM ducklake_data_file d JOIN ducklake_table t USING (table_id) JOIN ducklake_schema sc ON sc.schema_id = t.schema_id',
      )
    ).map((r) => String(r.path)),
  );
  for (const f of data) if (!listed.has(f)) problems.push(`a file no snapshot lists: ${f}`);
  for (const f of catalogFiles) if (!data.has(f.path)) problems.push(`a current file missing on disk: ${f.path}`);
  await withDuck(async (q) => {
    for (const f of catalogFiles) {
      const size = await stat(path.join(lake, f.path)).then(
        (s) => s.size,
        () => -1,
      );
      if (size !== f.bytes) problems.push(`${f.path}: files.bytes ${f.bytes} != ${size}`);
      if (size < 0) continue;
      const [r] = await q(`SELECT count(*)::BIGINT AS n FROM read_parquet(${sqlStr(path.join(lake, f.path))})`);
      if (Number(r!.n) !== f.rows) problems.push(`${f.path}: files.rows ${f.rows} != ${String(r!.n)}`);
    }
  });
  return problems;
}
