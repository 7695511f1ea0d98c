import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, onJsonLines, runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';
import { fingerprint, type LakePrint } from '../reliability/fingerprint.js';

// Ctrl-C and SIGTERM sent to a real `chainlake run` once its first batch is committed (an event it logs, never
// a timer): the run says so, stops fetching, releases the lake, is marked `interrupted`, exits 128 + signal,
// and the next run completes the lake identical to an uninterrupted one.
let dir: string;
let cleanup: () => Promise<void>;
let clean: LakePrint;

const ADDRESSES = ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c', '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157', '0x86024fd52bd9a84f6ba8cb499555b9ce10959591'];

/** `perWindow`: a commit after each window (the signalled runs); the clean run commits as a run does by default. */
async function writeJob(name: string, perWindow = true): Promise<{ file: string; lake: string }> {
  const lake = path.join(dir, name);
  const file = path.join(dir, `${name}.json`);
  await writeFile(
    file,
    JSON.stringify({
      name: 'interruptible',
      target: 'simulator',
      simulator: { seed: 1 },
      lake,
      concurrency: 2,
      // Small windows, a commit after each: the run is still busy when its first commit is logged.
      range: { fromBlock: 0, toBlock: 'head', windowBlocks: 9000 },
      ...(perWindow ? { commit: { everyRows: 1 } } : {}),
      datasets: { transactions: { addresses: ADDRESSES } },
    }),
  );
  return { file, lake };
}

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir());
  // The fingerprint does not depend on how rows were batched into commits.
  const { file, lake } = await writeJob('clean', false);
  const r = await runCli(['run', file, '-q'], { timeoutMs: 120_000 });
  expect(r.code, r.stderr).toBe(0);
  clean = await fingerprint(lake);
}, 180_000);
afterAll(async () => {
  await cleanup?.();
});

/** Starts the run, sends `signal` when the first commit is logged; resolves with the exit and the events. */
function runAndSignal(file: string, signal: NodeJS.Signals): Promise<{ code: number | null; events: Record<string, unknown>[]; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'run', file, '--log-format', 'json'], { stdio: ['ignore', 'ignore', 'pipe'] });
    const events: Record<string, unknown>[] = [];
    let stderr = '';
    let sent = false;
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    onJsonLines(child.stderr, (ev) => {
      events.push(ev);
      if (ev.event === 'commit' && !sent) {
        sent = true;
        child.kill(signal);
      }
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no exit within 120 s of starting (signal sent: ${sent})`));
    }, 120_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, events, stderr });
    });
  });
}

describe('an interrupted run', () => {
  for (const [signal, code, words] of [
    ['SIGINT', 130, 'interrupted (Ctrl-C)'],
    ['SIGTERM', 143, 'terminated (SIGTERM)'],
  ] as const) {
    it(`${signal}: logged, lock released, staging gone, marked interrupted, exit ${code}; the next run completes the lake`, async () => {
      const { file, lake } = await writeJob(signal.toLowerCase());
      const r = await runAndSignal(file, signal);
      expect(r.code, r.stderr).toBe(code);
      const ev = r.events.find((e) => e.event === 'run.interrupted');
      expect(ev, r.stderr).toBeDefined();
      expect(ev!.level).toBe('warn');
      expect(String(ev!.message)).toContain(words);
      const report = r.events.find((e) => e.event === 'run.report')?.report as { status: string; runId: string; totals: { windows: number } };
      expect(report.status).toBe('interrupted');
      const runId = report.runId;

      expect(existsSync(path.join(lake, '.chainlake.lock'))).toBe(false);
      expect(await readdir(path.join(lake, '_staging')).catch(() => [])).toEqual([]);
      const status = await runCli(['status', '--lake', lake, '--format', 'json']);
      expect(status.code, status.stderr).toBe(0);
      const runs = (JSON.parse(status.stdout) as { runs: { runId?: string; run_id?: string; status: string }[] }).runs;
      expect(runs.map((x) => [x.runId ?? x.run_id, x.status])).toEqual([[runId, 'interrupted']]);
      // It stopped early: some windows were still to fetch.
      const start = r.events.find((e) => e.event === 'run.start') as { windows: number };
      expect(report.totals.windows).toBeLessThan(start.windows);

      const next = await runCli(['run', file, '--log-format', 'json'], { timeoutMs: 120_000 });
      expect(next.code, next.stderr).toBe(0);
      expect(next.stderr).toContain(`resuming run ${runId}`);
      expect(await fingerprint(lake)).toEqual(clean);
    }, 300_000);
  }
});
