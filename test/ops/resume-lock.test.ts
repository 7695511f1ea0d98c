import { spawn } from 'node:child_process';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadJobFile } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { CLI, onJsonLines, runCliInProcess } from '../helpers/cli.js';
import { datasetDigest, queryCatalog, tempDir } from '../helpers/lake.js';

const ADDRESSES = [
  '0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c',
  '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157',
  '0x86024fd52bd9a84f6ba8cb499555b9ce10959591',
  '0x00671712d3cd244c79a1ebf9b8817f1a663a31ef',
  '0xaf273689c318ca16253af94ce5430173f424d98f',
  '0x347c9cb70a1bd9474035f751f2c4c74f0575dfc7',
];

// Each step is its own test with a hang guard, not a speed expectation: four runs had shared one 60 s timeout,
// which a loaded machine missed. A step needs the one before it (vitest runs them in order).
const HANG_GUARD_MS = 300_000;

let dir: string;
let cleanup: () => Promise<void>;
/** The jobs' simulator (seed 1) for the runs in this process, started once: the killed child starts its own. */
let sim: RunningSimulator;
beforeAll(async () => {
  ({ dir, cleanup } = await tempDir());
  sim = await startSimulator({ seed: 1 });
});
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

/** `perWindow`: a commit after every window, so a kill lands between commits; a clean run commits as a run does by default. */
async function writeJob(name: string, lake: string, perWindow = true): Promise<string> {
  const file = path.join(dir, `${name}.json`);
  await writeFile(
    file,
    JSON.stringify({
      name: 'resumable',
      target: 'simulator',
      simulator: { seed: 1 },
      lake,
      concurrency: 1,
      ...(perWindow ? { commit: { everyRows: 1 } } : {}),
      datasets: { transactions: { addresses: ADDRESSES }, erc20_transfers: { addresses: ADDRESSES } },
    }),
  );
  return file;
}

/** Starts `chainlake run` and SIGKILLs it right after its `after`-th commit; returns the killed run's id. */
function runAndKill(job: string, after: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'run', job, '--log-format', 'json'], { stdio: ['ignore', 'ignore', 'pipe'] });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no commit seen within ${HANG_GUARD_MS / 1000} s`));
    }, HANG_GUARD_MS);
    let runId = '';
    let commits = 0;
    onJsonLines(child.stderr, (ev) => {
      if (ev.event === 'run.start') runId = String(ev.runId);
      if (ev.event === 'commit' && ++commits === after) child.kill('SIGKILL');
    });
    child.on('close', (_code, signal) => {
      clearTimeout(timer);
      if (signal !== 'SIGKILL') reject(new Error(`the run ended by itself before ${after} commits`));
      else resolve(runId);
    });
  });
}

describe('resume after a kill', () => {
  const lake = () => path.join(dir, 'killed');
  let job: string;
  let killed: string;
  let committedBefore: number;
  let resumed: Awaited<ReturnType<typeof runJob>>;

  it(
    'a run SIGKILLed after its third commit keeps those commits',
    async () => {
      job = await writeJob('killed', lake());
      killed = await runAndKill(job, 3);
      expect(killed).not.toBe('');
      const [row] = await queryCatalog(lake(), `SELECT count(*)::INT AS n FROM windows WHERE run_id = '${killed}' AND status = 'committed'`);
      committedBefore = row!.n as number;
      expect(committedBefore).toBeGreaterThanOrEqual(3);
    },
    HANG_GUARD_MS,
  );

  it(
    'a re-run fetches only the windows not yet committed',
    async () => {
      expect(killed, 'the step before failed').toBeTruthy();
      // The re-run commits as a run does by default (a commit per window is only there to place the kill): it
      // resumes all the same, and a commit per window would make it the slowest step here.
      await writeJob('killed', lake(), false);
      resumed = await runJob(await loadJobFile(job, process.env), { simulator: sim });
      expect(resumed.status).toBe('complete');
      expect(resumed.resumeOf).toBe(killed);
      expect(resumed.windowsSkipped).toBe(committedBefore);
      expect(resumed.totals.windows).toBe(ADDRESSES.length * 2 - committedBefore);
      expect(await readdir(path.join(lake(), '_staging')).catch(() => [])).toEqual([]);
    },
    HANG_GUARD_MS,
  );

  it(
    'the resumed lake equals a clean run',
    async () => {
      expect(resumed, 'the step before failed').toBeDefined();
      const clean = path.join(dir, 'clean');
      const cleanReport = await runJob(await loadJobFile(await writeJob('clean', clean, false), process.env), { simulator: sim });
      expect(cleanReport.head).toBe(resumed.head);
      for (const [ds, key] of [
        ['transactions', 'transaction_hash'],
        ['erc20_transfers', 'transaction_hash'],
      ] as const) {
        expect(await datasetDigest(lake(), ds, key), ds).toEqual(await datasetDigest(clean, ds, key));
      }
    },
    HANG_GUARD_MS,
  );

  it(
    'the run after that is a fresh one: nothing left to resume',
    async () => {
      expect(resumed, 'the step before failed').toBeDefined();
      const again = await runJob(await loadJobFile(job, process.env), { simulator: sim });
      expect(again.resumeOf).toBeNull();
    },
    HANG_GUARD_MS,
  );
});

describe('the lake lock', () => {
  it('takes over a lock left by a killed process', { timeout: HANG_GUARD_MS }, async () => {
    const lake = path.join(dir, 'stale');
    await mkdir(lake, { recursive: true });
    // A pid that cannot be alive: above the kernel's pid limit.
    await writeFile(
      path.join(lake, '.chainlake.lock'),
      JSON.stringify({ pid: 2 ** 22 + 1, host: os.hostname(), runId: 'dead', startedAt: '2026-01-01T00:00:00Z' }),
    );
    // The lock's holder is dead by its pid, not by a process ending here: the export runs in this process.
    const r = await runCliInProcess(['export', 'transactions', '--simulator', '--address', ADDRESSES[0]!, '--to-block', '5000', '--lake', lake]);
    expect(r.code, r.stderr).toBe(0);
    expect(await readdir(lake)).not.toContain('.chainlake.lock');
  });

  it('--wait waits for the holder to finish instead of exiting 75', { timeout: HANG_GUARD_MS }, async () => {
    const lake = path.join(dir, 'waited');
    await mkdir(lake, { recursive: true });
    const lockFile = path.join(lake, '.chainlake.lock');
    await writeFile(lockFile, JSON.stringify({ pid: process.pid, host: os.hostname(), runId: 'holder', startedAt: new Date().toISOString() }));
    // In this process (the holder is this process: alive, as a run would be): what the command logs goes to
    // stderr, caught here until it returns, and the holder finishes once the waiter has said it is waiting.
    let stderr = '';
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string | Uint8Array) => {
      const first = !stderr.includes('"event":"lock.wait"');
      stderr += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
      if (first && stderr.includes('"event":"lock.wait"')) void rm(lockFile);
      return true;
    }) as typeof process.stderr.write;
    let r: { code: number; stderr: string };
    try {
      const run = await runCliInProcess([
        'export',
        'transactions',
        '--simulator',
        '--address',
        ADDRESSES[0]!,
        '--to-block',
        '5000',
        '--lake',
        lake,
        '--wait',
        '--log-format',
        'json',
      ]);
      r = { code: run.code ?? 0, stderr: stderr + run.stderr };
    } finally {
      process.stderr.write = write;
    }
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/"event":"lock.wait"/);
  });
});
