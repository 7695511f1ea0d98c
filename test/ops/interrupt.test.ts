import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLakeTables } from '../../src/lake/open.js';
import { lakeStatus } from '../../src/load/read/status.js';
import { parseJob } from '../../src/pipeline/job.js';
import type { LiveRun } from '../../src/pipeline/live.js';
import type { Level, Logger } from '../../src/pipeline/log.js';
import type { RunReport } from '../../src/pipeline/report.js';
import { runJob, type RunOptions } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { CLI, onJsonLines } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { fingerprint, type LakePrint } from '../reliability/fingerprint.js';

// Ctrl-C and SIGTERM on a single-machine run (issue 34): the run stops sending requests, leaves a window in
// mid-fetch to do, commits every window it had fetched, is marked `interrupted`, counts every request it
// sent (as the quota ledger does), and the next run fetches only what was not committed, ending with the lake
// of an uninterrupted run. Every interruption is set off by events of the run (windows done, a request
// starting, a commit held once decided), never by a timer.
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let clean: LakePrint;
/** The uninterrupted run's requests per window (by window id): what a run that fetches that window sends. */
let cleanRequests: Map<string, number>;

const ADDRESSES = ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c', '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157', '0x86024fd52bd9a84f6ba8cb499555b9ce10959591'];

/**
 * 15 windows of 9,000 blocks (three addresses), each of 1 to 8 pages of 50 rows, two at a time. The quota
 * is never reached: it is there so the run keeps the request ledger the report must agree with.
 */
function jobDoc(lake: string, commit?: { everyRows: number }): Record<string, unknown> {
  return {
    name: 'interruptible',
    target: 'simulator',
    simulator: { seed: 1 },
    lake,
    concurrency: 2,
    pageSize: 50,
    dailyRequestQuota: 1_000_000,
    range: { fromBlock: 0, toBlock: 'head', windowBlocks: 9000 },
    ...(commit ? { commit } : {}),
    datasets: { transactions: { addresses: ADDRESSES } },
  };
}

async function writeJob(name: string, commit?: { everyRows: number }): Promise<{ file: string; lake: string }> {
  const lake = path.join(dir, name);
  const file = path.join(dir, `${name}.json`);
  await writeFile(file, JSON.stringify(jobDoc(lake, commit)));
  return { file, lake };
}

interface WindowRow {
  id: string;
  status: string;
  rowsGot: number;
  rowsExpected: number;
  requests: number;
  from: number;
  to: number;
  scope: string;
}

/** A run's window records, with the ids its log uses. */
async function windowsOf(lake: string, runId: string): Promise<WindowRow[]> {
  const rows = await queryCatalog(
    lake,
    `SELECT dataset, network, scope, from_block::INT AS f, to_block::INT AS t, status, rows_got::INT AS got, rows_expected::INT AS expected,
       requests::INT AS requests FROM windows WHERE run_id = '${runId}' ORDER BY ALL`,
  );
  return rows.map((r) => ({
    id: `${String(r.dataset)}/${String(r.network)}/${String(r.scope)}/${Number(r.f)}-${Number(r.t)}`,
    status: String(r.status),
    rowsGot: Number(r.got),
    rowsExpected: Number(r.expected),
    requests: Number(r.requests),
    from: Number(r.f),
    to: Number(r.t),
    scope: String(r.scope),
  }));
}

/** Requests the run's ledger (the catalog's request_usage) counts. */
async function ledgerOf(lake: string, runId: string): Promise<number> {
  return Number((await queryCatalog(lake, `SELECT coalesce(sum(requests), 0)::INT AS n FROM request_usage WHERE run_id = '${runId}'`))[0]!.n);
}

const sum = (xs: Iterable<number>): number => [...xs].reduce((a, b) => a + b, 0);
/** The sentence an interrupted run ends with. */
const keptMessage = (windows: number, rows: number, left: number): string =>
  `interrupted: committed ${windows} fetched window${windows === 1 ? '' : 's'} (${rows.toLocaleString('en-US')} rows); the next run fetches the ${left} left`;

beforeAll(async () => {
  sim = await startSimulator({ seed: 1 });
  ({ dir, cleanup } = await tempDir());
  // The fingerprint does not depend on how rows were batched into commits.
  const lake = path.join(dir, 'clean');
  const report = await runJob(parseJob(jobDoc(lake), 'clean', process.env), { simulator: sim });
  expect(report.status).toBe('complete');
  clean = await fingerprint(lake);
  const windows = await windowsOf(lake, report.runId);
  expect(windows).toHaveLength(15);
  cleanRequests = new Map(windows.map((w) => [w.id, w.requests]));
  // Windows of several pages: one can be caught in mid-fetch.
  expect(Math.max(...cleanRequests.values())).toBeGreaterThanOrEqual(5);
}, 180_000);
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

/**
 * Options that interrupt a run in process, as Ctrl-C would, once `after` windows are done and a window in
 * mid-fetch has staged some of its pages: checked as the run starts a request, so the window sending it is
 * cut short (its page comes back after the signal).
 */
function interruptAfter(after: number) {
  const stop = new AbortController();
  const done = new Map<string, number>();
  const events: { level: Level; event: string; message: string; fields?: Record<string, unknown> }[] = [];
  let live: LiveRun | undefined;
  const check = (): void => {
    if (stop.signal.aborted || done.size < after || !live) return;
    const staged = sum([...live.datasets.values()].map((d) => d.rows));
    if (staged > sum(done.values())) stop.abort();
  };
  const logger: Logger = {
    log(level, event, message, fields) {
      events.push({ level, event, message, fields });
      if (event === 'window.done') done.set(String(fields!.window), Number(fields!.rows));
    },
  };
  const opts: RunOptions = { simulator: sim, signal: stop.signal, logger, onStart: (l) => (live = l), transport: { onAttempt: check } };
  return { opts, done, events, stop };
}

/** The contiguous prefix of committed windows from block 0 of each scope: where its watermark must stand. */
function expectedWatermarks(windows: readonly WindowRow[]): Map<string, number> {
  const marks = new Map<string, number>();
  for (const scope of new Set(windows.map((w) => w.scope))) {
    let mark: number | undefined;
    for (const w of windows.filter((x) => x.scope === scope).sort((a, b) => a.from - b.from)) {
      if (w.from !== (mark === undefined ? 0 : mark + 1)) break;
      mark = w.to;
    }
    if (mark !== undefined) marks.set(scope, mark);
  }
  return marks;
}

describe('an interrupted run keeps what it fetched (in process)', () => {
  for (const [what, commit] of [
    ['one commit at the end', undefined],
    ['a commit after each window, batches still queued at the signal', { everyRows: 1 }],
  ] as const) {
    it(`${what}: every window fetched is committed, requests counted as the ledger does, the next run fetches only the rest`, async () => {
      const lake = path.join(dir, `in-process-${commit ? 'batches' : 'one'}`);
      const job = parseJob(jobDoc(lake, commit), 'interrupt-test', process.env);
      const { opts, done, events, stop } = interruptAfter(5);
      const first = await runJob(job, opts);
      expect(stop.signal.aborted).toBe(true);
      expect(first.status).toBe('interrupted');

      // Kept: exactly the windows done before the run stopped, each complete, and their rows.
      const windows = await windowsOf(lake, first.runId);
      expect(windows.map((w) => w.id).sort()).toEqual([...done.keys()].sort());
      expect(done.size).toBeGreaterThanOrEqual(5);
      for (const w of windows) {
        expect(w.status, w.id).toBe('committed');
        expect(w.rowsGot, w.id).toBe(w.rowsExpected);
        expect(w.rowsGot, w.id).toBe(done.get(w.id));
      }
      const rows = sum(done.values());
      expect(rows).toBeGreaterThan(0);
      expect(first.totals.windows).toBe(done.size);
      expect(first.totals.rows).toBe(rows);
      const inLake = Number((await queryCatalog(lake, 'SELECT count(*)::INT AS n FROM transactions'))[0]!.n);
      expect(inLake).toBe(first.totals.landed);
      expect(inLake).toBeGreaterThan(0);
      // Left to do: the windows not kept, the one caught in mid-fetch among them.
      const left = 15 - done.size;
      expect(first.windowsLeft).toBe(left);
      expect(left).toBeGreaterThan(0);

      // Requests: every one sent, those of the window cut short too, as the ledger, the quota and the run record count them.
      const ledger = await ledgerOf(lake, first.runId);
      expect(first.totals.requests).toBe(ledger);
      expect(first.quota?.usedToday).toBe(ledger);
      expect(first.totals.requests).toBeGreaterThan(sum(windows.map((w) => w.requests)) + first.outsideWindows.requests);
      const run = await queryCatalog(lake, `SELECT status, report::VARCHAR AS report FROM runs WHERE run_id = '${first.runId}'`);
      expect(run).toHaveLength(1);
      expect(run[0]!.status).toBe('interrupted');
      const recorded = JSON.parse(String(run[0]!.report)) as RunReport;
      expect(recorded.totals).toMatchObject({ requests: ledger, windows: done.size, rows });
      expect(recorded.windowsLeft).toBe(left);

      // Watermarks only as far as each scope's committed windows are contiguous from block 0.
      const marks = await queryCatalog(lake, 'SELECT scope, block::INT AS block FROM watermarks');
      expect(new Map(marks.map((m) => [String(m.scope), Number(m.block)]))).toEqual(expectedWatermarks(windows));

      // A window cut short is no failure: nothing logged as an error.
      expect(events.filter((e) => e.level === 'error').map((e) => e.message)).toEqual([]);
      expect(events.some((e) => e.event === 'window.interrupted')).toBe(true);

      // It says what it kept.
      const kept = events.find((e) => e.event === 'run.kept');
      expect(kept?.message).toBe(keptMessage(done.size, rows, left));

      // The next run resumes and fetches only the windows not committed, each with the requests it takes.
      // (Its commits as a run makes them by default: how batches fall does not change what is fetched.)
      const next = await runJob(parseJob(jobDoc(lake), 'interrupt-test', process.env), { simulator: sim });
      expect(next.status).toBe('complete');
      expect(next.resumeOf).toBe(first.runId);
      const rest = [...cleanRequests.keys()].filter((id) => !done.has(id));
      expect((await windowsOf(lake, next.runId)).map((w) => w.id).sort()).toEqual(rest.sort());
      expect(next.totals.requests).toBe(sum(rest.map((id) => cleanRequests.get(id)!)));
      expect(await ledgerOf(lake, next.runId)).toBe(next.totals.requests);
      expect(await fingerprint(lake)).toEqual(clean);
    }, 180_000);
  }
});

/**
 * The run after an interrupted one, in this process (what `chainlake run <job>` runs; the signals are what the
 * child processes here are for): its report and the messages it logged.
 */
async function nextRun(lake: string): Promise<{ report: RunReport; messages: string[] }> {
  const messages: string[] = [];
  const logger: Logger = { log: (_level, _event, message) => void messages.push(message) };
  const report = await runJob(parseJob(jobDoc(lake), 'interrupt-test', process.env), { simulator: sim, logger });
  return { report, messages };
}

/** Starts `chainlake run`, calls `onEvent` with each of its log events (it may signal the child); resolves with the exit and the events. */
function runCliWith(
  file: string,
  args: string[],
  onEvent: (ev: Record<string, unknown>, child: ReturnType<typeof spawn>) => void,
  env: NodeJS.ProcessEnv = {},
  /** Called with all of stderr so far, at each chunk (lines that are not JSON, such as a test hold's). */
  onStderr?: (stderr: string, child: ReturnType<typeof spawn>) => void,
): Promise<{ code: number | null; events: Record<string, unknown>[]; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'run', file, '--log-format', 'json', ...args], {
      stdio: ['pipe', 'ignore', 'pipe'],
      env: { ...process.env, ...env },
    });
    const events: Record<string, unknown>[] = [];
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
      onStderr?.(stderr, child);
    });
    onJsonLines(child.stderr!, (ev) => {
      events.push(ev);
      onEvent(ev, child);
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no exit within 120 s of starting; stderr:\n${stderr}`));
    }, 120_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, events, stderr });
    });
  });
}

describe('an interrupted `chainlake run`', () => {
  for (const [signal, code, words] of [
    ['SIGINT', 130, 'interrupted (Ctrl-C)'],
    ['SIGTERM', 143, 'terminated (SIGTERM)'],
  ] as const) {
    it(`${signal} once 5 windows are done: logged, every fetched window committed, lock released, staging gone, marked interrupted, exit ${code}; the next run completes the lake`, async () => {
      // SIGINT: a commit after each window, so batches are committed and queued when the signal comes;
      // SIGTERM: one commit at the end, the one the signal starts.
      const { file, lake } = await writeJob(signal.toLowerCase(), signal === 'SIGINT' ? { everyRows: 1 } : undefined);
      const done = new Set<string>();
      const r = await runCliWith(file, ['--verbose'], (ev, child) => {
        if (ev.event !== 'window.done') return;
        done.add(String(ev.window));
        if (done.size === 5) child.kill(signal);
      });
      expect(r.code, r.stderr).toBe(code);
      const ev = r.events.find((e) => e.event === 'run.interrupted');
      expect(ev, r.stderr).toBeDefined();
      expect(ev!.level).toBe('warn');
      expect(String(ev!.message)).toContain(`${words}: no new requests; committing every window already fetched`);
      // A window cut short is left to the next run, not logged as failed.
      expect(r.events.filter((e) => e.level === 'error').map((e) => e.message)).toEqual([]);
      const report = r.events.find((e) => e.event === 'run.report')?.report as RunReport;
      expect(report.status).toBe('interrupted');
      const runId = report.runId;
      // Every window it fetched is in the lake (each done window logged before the signal, or while it came).
      const windows = await windowsOf(lake, runId);
      expect(windows.map((w) => w.id).sort()).toEqual([...done].sort());
      expect(windows.every((w) => w.status === 'committed')).toBe(true);
      expect(report.totals.windows).toBe(done.size);
      const kept = r.events.find((e) => e.event === 'run.kept');
      expect(kept?.message).toBe(keptMessage(report.totals.windows, report.totals.rows, report.windowsLeft!));
      expect(report.totals.requests).toBe(await ledgerOf(lake, runId));

      expect(existsSync(path.join(lake, '.chainlake.lock'))).toBe(false);
      expect(await readdir(path.join(lake, '_staging')).catch(() => [])).toEqual([]);
      // What `chainlake status` reports of the lake's runs.
      const reader = await openLakeTables({ kind: 'local', lake }, { datasets: false });
      const { runs } = await lakeStatus(reader.conn, reader.lake, { runs: 10 }).finally(() => reader.close());
      expect(runs.map((x) => [x.run_id, x.status])).toEqual([[runId, 'interrupted']]);
      // It stopped early: some windows were still to fetch.
      const start = r.events.find((e) => e.event === 'run.start') as { windows: number };
      expect(report.totals.windows).toBeLessThan(start.windows);
      expect(report.windowsLeft).toBe(start.windows - report.totals.windows);

      const next = await nextRun(lake);
      expect(next.report.status).toBe('complete');
      expect(next.messages.join('\n')).toContain(`resuming run ${runId}`);
      expect(await fingerprint(lake)).toEqual(clean);
    }, 300_000);
  }

  it('a second Ctrl-C during the commit of what was fetched stops at once; the next run finishes that commit and fetches only the rest', async () => {
    // One commit at the end: the one the first Ctrl-C starts, held once decided (journal written, nothing renamed).
    const { file, lake } = await writeJob('twice');
    const done = new Set<string>();
    let held = false;
    const r = await runCliWith(
      file,
      ['--verbose'],
      (ev, child) => {
        if (ev.event === 'window.done') done.add(String(ev.window));
        if (ev.event === 'window.done' && done.size === 5) child.kill('SIGINT');
      },
      { CHAINLAKE_TEST_HOLD_AT: 'journal' },
      (stderr, child) => {
        if (!held && stderr.includes('chainlake-test-hold journal')) {
          held = true;
          child.kill('SIGINT');
        }
      },
    );
    expect(held, r.stderr).toBe(true);
    expect(r.code, r.stderr).toBe(130);
    expect(r.stderr).toContain('SIGINT again: stopping at once');
    const runId = String(r.events.find((e) => e.event === 'run.start')!.runId);
    expect(r.events.some((e) => e.event === 'run.report')).toBe(false);

    const next = await nextRun(lake);
    expect(next.report.status).toBe('complete');
    expect(next.messages.join('\n')).toContain(`resuming run ${runId}`);
    // The decided commit was finished: the windows done before Ctrl-C are in the lake, under the interrupted run.
    expect((await windowsOf(lake, runId)).map((w) => w.id).sort()).toEqual([...done].sort());
    const report = next.report;
    const rest = [...cleanRequests.keys()].filter((id) => !done.has(id));
    expect((await windowsOf(lake, report.runId)).map((w) => w.id).sort()).toEqual(rest.sort());
    expect(report.totals.requests).toBe(sum(rest.map((id) => cleanRequests.get(id)!)));
    expect(await fingerprint(lake)).toEqual(clean);
  }, 300_000);
});
