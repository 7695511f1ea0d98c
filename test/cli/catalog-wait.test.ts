import { spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { CLI, runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

// Issue 37, "waiting is visible": a command that waits for catalog.duckdb (another process's DuckDB session holds
// it) says so, naming the process, how long at most and how to avoid it. The lock is between processes, so the
// holder and the command are child processes; the holder lets go once the command has said it waits.
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let lake: string;
let jobFile: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 5 });
  ({ dir, cleanup } = await tempDir('chainlake-catalog-wait-'));
  lake = path.join(dir, 'lake');
  const doc = {
    name: 'wait',
    target: 'simulator',
    simulator: { seed: 5 },
    lake,
    range: { fromBlock: 0, toBlock: 3000 },
    datasets: { transactions: { addresses: sim.examples.addresses.slice(0, 1) } },
  };
  jobFile = path.join(dir, 'wait.json');
  await writeFile(jobFile, JSON.stringify(doc));
  expect((await runJob(parseJob(doc, jobFile, process.env), { simulator: sim })).status).toBe('complete');
}, 120_000);

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

/** A process holding the catalog open (read-write, or read-only) until its stdin closes. */
async function holdCatalog(readOnly: boolean): Promise<ChildProcess> {
  const api = path.resolve('node_modules/@duckdb/node-api/lib/index.js');
  const script = `import(${JSON.stringify(api)}).then(async (m) => {
    await m.DuckDBInstance.create(${JSON.stringify(path.join(lake, 'catalog.duckdb'))}, ${readOnly ? "{ access_mode: 'READ_ONLY' }" : '{}'});
    process.stdout.write('held\\n');
    process.stdin.resume();
    process.stdin.on('end', () => process.exit(0));
  })`;
  const holder = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  const timer = setTimeout(() => holder.kill('SIGKILL'), 60_000);
  holder.on('exit', () => clearTimeout(timer));
  await new Promise<void>((resolve, reject) => {
    holder.stdout!.once('data', () => resolve());
    holder.once('exit', (code) => reject(new Error(`the holder exited (${code}) before it held the catalog`)));
  });
  return holder;
}

/** Runs the CLI; once its stderr says it waits, the holder lets go. */
function runWhileHeld(args: string[], holder: ChildProcess): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, CHAINLAKE_API_KEY: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    let stdout = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (/wait(s|ing) for .*catalog\.duckdb/.test(stderr)) {
        holder.stdin!.end();
      }
    });
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      holder.stdin!.end();
      resolve({ code, stderr, stdout });
    });
  });
}

describe('waiting for the catalog is visible', () => {
  it('query says it waits for a writing session, naming the process and the way out, then answers', async () => {
    const holder = await holdCatalog(false);
    const r = await runWhileHeld(['query', '--lake', lake, '--format', 'csv', 'SELECT count(*) AS n FROM transactions'], holder);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(new RegExp(`waiting for .*catalog\\.duckdb: .*\\(PID ${holder.pid}\\) has it open for writing \\(up to \\d+ s\\)`));
    expect(r.stderr).toMatch(/hint: open the catalog with `duckdb -readonly`/);
    expect(Number(r.stdout.trim().split('\n')[1])).toBeGreaterThan(0);
  });

  it('a run says its commit waits for any open session, then commits', async () => {
    const holder = await holdCatalog(true);
    const r = await runWhileHeld(['run', jobFile, '-q'], holder);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(new RegExp(`the commit waits for .*catalog\\.duckdb: .*\\(PID ${holder.pid}\\) has it open \\(up to \\d+ s`));
    expect(r.stderr).toMatch(/hint: a commit needs the catalog to itself/);
  });
});

describe('CHAINLAKE_CATALOG_WAIT_MS', () => {
  // The CLI reads the variable and hands it down (nothing below src/cli reads the environment); a value that is not a
  // number of milliseconds is refused with the fix, not ignored. That a set value reaches the writer's wait is
  // test/load/catalog.test.ts's "held" case (CHAINLAKE_CATALOG_WAIT_MS 300).
  it('a value that is not milliseconds exits 2 naming the variable and the fix', async () => {
    const r = await runCli(['status', '--lake', lake], { env: { CHAINLAKE_CATALOG_WAIT_MS: 'five minutes' } });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/CHAINLAKE_CATALOG_WAIT_MS="five minutes" is not a number of milliseconds/);
    expect(r.stderr).toMatch(/hint: set it to the longest wait/);
  });
});
