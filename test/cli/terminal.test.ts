import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { CLI, runCliCapturing, type CliResult } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

// The progress display and retry lines as a person sees them: the CLI runs on a real pseudo-terminal
// (util-linux `script`) of a given size, and the test reads what was drawn.
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  sim = await startSimulator({ seed: 11 });
  ({ dir, cleanup } = await tempDir());
});
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

/**
 * A command in this process, as the bin runs it (test/helpers/cli.ts runCliCapturing: every byte it writes and the
 * exit code it decides), with `env` over this process's environment for the call (no API key or URL unless given):
 * the JSON log lines need no terminal, nor a process of their own.
 */
const runCli = (args: string[], opts: { env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> =>
  runCliCapturing(args, { CHAINLAKE_API_KEY: '', CHAINLAKE_MAINNET_URL: '', ...opts.env });

const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** Runs the CLI on a pseudo-terminal of `rows` x `cols`; returns everything drawn (stdout and stderr share it). */
function onTerminal(args: string[], rows: number, cols: number, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; screen: string }> {
  const cmd = `stty rows ${rows} cols ${cols}; exec ${[process.execPath, CLI, ...args].map(shellQuote).join(' ')}`;
  return new Promise((resolve, reject) => {
    execFile(
      'script',
      ['-qefc', cmd, '/dev/null'],
      { env: { ...process.env, CHAINLAKE_API_KEY: '', CHAINLAKE_MAINNET_URL: '', ...env }, timeout: 90_000, maxBuffer: 64 << 20 },
      (err, stdout) => {
        if (err && typeof (err as { code?: unknown }).code !== 'number') return reject(err);
        resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, screen: stdout });
      },
    );
  });
}

/** The text of each line as the terminal shows it: escape sequences and carriage returns removed. */
const visibleLines = (screen: string): string[] =>
  screen
    .split('\n')
    .map((l) => l.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').replace(/\r/g, ''))
    .filter((l) => l.length > 0);

async function job(name: string, body: Record<string, unknown>): Promise<string> {
  const file = path.join(dir, `${name}.json`);
  await writeFile(file, JSON.stringify({ name, network: 'mainnet', target: 'api', lake: path.join(dir, `lake-${name}`), ...body }));
  return file;
}

// Hang guard, not a speed expectation: each step runs the CLI in child processes on a shared machine.
describe('on a terminal', { timeout: 300_000 }, () => {
  it('an unreachable API shows its retries at once: endpoint, reason, attempt n of m, next wait; JSON logs carry them at info', async () => {
    const file = await job('unreachable', {
      endpoints: { mainnet: 'http://127.0.0.1:9/mainnet' },
      retry: { maxAttempts: 3, baseDelayMs: 50 },
      datasets: { transactions: { addresses: [sim.examples.addresses[0]] } },
    });
    const t = await onTerminal(['run', file], 20, 80);
    // Nothing answers at the address: a setup error (exit 2), with the address and the settings to check.
    expect(t.code).toBe(2);
    expect(t.screen).toContain('nothing answers at http://127.0.0.1:9');
    const lines = visibleLines(t.screen);
    expect(
      lines.some((l) => /^retrying block \(latest\): .*, attempt 2 of 3, next in \d+\.\d s$/.test(l)),
      t.screen,
    ).toBe(true);
    for (const l of lines.filter((x) => x.startsWith('retrying'))) expect(l.length).toBeLessThan(80);

    const j = await runCli(['run', file, '--log-format', 'json']);
    const events = j.stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: string; event: string; attempt?: number; maxAttempts?: number; message: string });
    const retries = events.filter((e) => e.event === 'request.retry');
    expect(retries.map((e) => [e.level, e.attempt, e.maxAttempts])).toEqual([
      ['info', 2, 3],
      ['info', 3, 3],
    ]);
    expect(retries[0]!.message).toMatch(/^retrying block \(latest\): network failure \(ECONNREFUSED\), attempt 2 of 3, next in/);

    // Every endpoint a retry or give-up line names is an id `describe --endpoints` lists (here: a dataset's
    // endpoint, the head given so that nothing asks for blocks/latest; a final head, so that the range is one window).
    const paged = await runCli(['run', file, '--head', '1000', '--finality-depth', '0', '--log-format', 'json']);
    const named = paged.stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { event: string; endpoint?: string; message: string })
      .filter((e) => e.event === 'request.retry');
    expect(named.map((e) => e.message.match(/^retrying (\S+): /)?.[1])).toEqual(['account_transactions', 'account_transactions']);
    expect(paged.stderr).toMatch(/account_transactions: gave up after 3 attempts/);
    const ids = (await runCli(['describe', '--endpoints'])).stdout.split('\n').map((l) => l.split(/\s+/)[0]);
    expect(ids).toEqual(expect.arrayContaining(['account_transactions', 'block']));
  });

  it('progress fits a short, narrow terminal; the final table fits 80 columns; debug lines only with -v', async () => {
    const a = sim.examples.addresses;
    const file = await job('progress', {
      endpoints: { mainnet: sim.urls.mainnet, finance: sim.urls.finance },
      range: { fromBlock: 0, toBlock: 20_000, windowBlocks: 2_000 },
      concurrency: 2,
      datasets: {
        transactions: { addresses: a.slice(0, 3) },
        erc20_transfers: { addresses: a.slice(0, 3) },
        internal_transactions: { addresses: a.slice(0, 3) },
        balances: { addresses: a.slice(0, 3) },
        mined_blocks: { addresses: [sim.examples.miner] },
        dashboard: {},
      },
    });
    const rows = 5;
    const t = await onTerminal(['run', file], rows, 72, { CHAINLAKE_API_KEY: sim.apiKey });
    expect(t.code, t.screen).toBe(0);
    // Every redraw moves up over at most the screen's height less one line, so none is left in the scrollback.
    const ups = [...t.screen.matchAll(/\x1b\[(\d+)A/g)].map((m) => Number(m[1]));
    expect(ups.length).toBeGreaterThan(0);
    expect(Math.max(...ups)).toBeLessThanOrEqual(rows - 1);
    const lines = visibleLines(t.screen);
    // Progress lines never reach the last column (a line that wraps breaks the redraw).
    for (const l of lines.filter((x) => /windows +\d+\/\d+/.test(x))) expect(l.length, l).toBeLessThan(72);
    expect(lines.some((l) => /^… and \d+ more datasets$/.test(l))).toBe(true);
    // The report table folds to the terminal's width.
    const table = lines.slice(
      lines.findIndex((l) => l.startsWith('run ') && / complete in /.test(l)) + 1,
      lines.findIndex((l) => l.startsWith('lake: ')),
    );
    expect(table.length).toBeGreaterThan(8);
    for (const l of table) expect(l.length, l).toBeLessThanOrEqual(72);

    // The log levels need no screen and no wide job: one dataset of one address.
    const small = await job('levels', {
      endpoints: { mainnet: sim.urls.mainnet },
      range: { fromBlock: 0, toBlock: 20_000, windowBlocks: 2_000 },
      datasets: { transactions: { addresses: a.slice(0, 1) } },
    });
    const quietJson = await runCli(['run', small, '--log-format', 'json'], { env: { CHAINLAKE_API_KEY: sim.apiKey } });
    expect(quietJson.code, quietJson.stderr).toBe(0);
    expect(quietJson.stderr).not.toMatch(/"level":"debug"/);
    expect(quietJson.stderr).toMatch(/"event":"commit"/);
    const verbose = await runCli(['run', small, '--full-refresh', '--log-format', 'json', '-v'], { env: { CHAINLAKE_API_KEY: sim.apiKey } });
    expect(verbose.code, verbose.stderr).toBe(0);
    expect(verbose.stderr).toMatch(/"level":"debug","event":"window.done"/);
  });
});
