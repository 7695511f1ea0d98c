import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { runCli, runCliInProcess } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

// What a person must fix exits 2 with a message naming the flag, variable or file; 1 stays for "the next run
// catches up". Each case is typed as a user would, against a simulator that demands a key.
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
const KEY = 'setup-key-51c0e2';
let address: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 5, apiKey: KEY });
  address = sim.examples.addresses[0]!;
  ({ dir, cleanup } = await tempDir());
});
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

const env = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({ CHAINLAKE_MAINNET_URL: sim.urls.mainnet, CHAINLAKE_API_KEY: KEY, ...extra });

// Hang guard, not a speed expectation: each step runs the CLI in child processes on a shared machine.
describe('setup errors exit 2 and name the fix', { timeout: 300_000 }, () => {
  it('a refused or missing API key names CHAINLAKE_API_KEY and never prints the key', async () => {
    const wrong = await runCli(['export', 'transactions', '--address', address, '--lake', path.join(dir, 'k1'), '-q'], {
      env: env({ CHAINLAKE_API_KEY: 'wrong-key-xyz' }),
    });
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(/HTTP 403/);
    expect(wrong.stderr).toMatch(/hint: .*CHAINLAKE_API_KEY/);
    expect(wrong.stderr + wrong.stdout).not.toContain('wrong-key-xyz');
    const missing = await runCli(['export', 'transactions', '--address', address, '--lake', path.join(dir, 'k2'), '-q'], {
      env: env({ CHAINLAKE_API_KEY: '' }),
    });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/HTTP 401[\s\S]*CHAINLAKE_API_KEY/);
    // A dataset with no block range asks for no head: the key is refused by every window instead, which no re-run
    // catches up either (a distributed worker that took only such windows exits 2 too).
    const windows = await runCli(['export', 'balances', '--address', address, '--lake', path.join(dir, 'k3'), '-q'], {
      env: env({ CHAINLAKE_API_KEY: 'wrong-key-xyz' }),
    });
    expect(windows.code).toBe(2);
    expect(windows.stderr).toMatch(/every window failed: balances: HTTP 403[^\n]*\nhint: .*CHAINLAKE_API_KEY/);
    expect(windows.stderr + windows.stdout).not.toContain('wrong-key-xyz');
  });

  it('a finance dataset without a finance URL names CHAINLAKE_FINANCE_URL before fetching', async () => {
    const r = await runCli(['export', 'dashboard', '--lake', path.join(dir, 'f1')], { env: env({ CHAINLAKE_FINANCE_URL: '' }) });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/no finance base URL.*CHAINLAKE_FINANCE_URL/);
    expect(r.stdout).toBe('');
  });

  it('an unusable lake path, an empty --lake and a --report folder that does not exist', async () => {
    const file = path.join(dir, 'a-file');
    await writeFile(file, 'x');
    const lake = await runCli(['export', 'transactions', '--address', address, '--lake', path.join(file, 'lake'), '-q'], { env: env() });
    expect(lake.code).toBe(2);
    expect(lake.stderr).toMatch(/not a directory.*--lake/);

    for (const cmd of [['export', 'transactions', '--address', address], ['query', 'SELECT 1'], ['status']]) {
      const empty = await runCli([...cmd, '--lake', ''], { env: env(), cwd: dir });
      expect(empty.code, cmd[0]).toBe(2);
      expect(empty.stderr, cmd[0]).toMatch(/--lake is empty \(is the variable it was given unset\?\)/);
    }

    const report = path.join(dir, 'no-such-folder', 'report.json');
    const r = await runCli(['export', 'transactions', '--address', address, '--lake', path.join(dir, 'r1'), '--report', report], { env: env() });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--report ${report}: the folder ${path.dirname(report)} does not exist`);
    expect(r.stdout).toBe(''); // refused before fetching anything
  });

  it('bad flag values quote what was typed; export speaks its flags, not job-file keys', async () => {
    const conc = await runCli(['export', 'transactions', '--address', address, '--concurrency', 'abc'], { env: env() });
    expect(conc.code).toBe(2);
    expect(conc.stderr).toContain('--concurrency must be an integer from 1 to 256, got "abc"');
    const from = await runCli(['export', 'transactions', '--address', address, '--from-block=ten'], { env: env() });
    expect(from.code).toBe(2);
    expect(from.stderr).toContain('--from-block must be a block number (a non-negative integer), got "ten"');
    const addr = await runCli(['export', 'transactions', '--address', address, '--address', '0x12'], { env: env() });
    expect(addr.code).toBe(2);
    expect(addr.stderr).toMatch(/--address \(value 2\): not an address/);
    expect(addr.stderr).not.toMatch(/addresses/);
    const port = await runCliInProcess(['simulate', '--port', '99999']);
    expect(port.code).toBe(2);
    expect(port.stderr).toContain('--port must be an integer 0..65535, got 99999');
  });

  it('--help lists every exit code', async () => {
    const h = await runCliInProcess(['--help']);
    expect(h.code).toBe(0);
    const text = h.stdout.replace(/\s+/g, ' ');
    for (const code of [
      '0 complete',
      '1 some windows failed',
      '2 something to fix',
      '3 rejects under --strict',
      '4 daily request quota',
      '5 verify or reconcile found a difference',
      '75 lake locked',
      '130 interrupted',
      '143 terminated',
    ])
      expect(text).toContain(code);
  });
});
