import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toChecksumAddress } from '../../src/evm/keccak.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { runCli, runCliInProcess } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  sim = await startSimulator({ seed: 9 });
  ({ dir, cleanup } = await tempDir());
});
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

const env = (): NodeJS.ProcessEnv => ({ CHAINLAKE_MAINNET_URL: sim.urls.mainnet, CHAINLAKE_API_KEY: sim.apiKey });

// Hang guard, not a speed expectation: each step runs the CLI in child processes on a shared machine.
describe('the smaller points of daily use', { timeout: 300_000 }, () => {
  it('a malformed job file is located by line and column', async () => {
    const job = path.join(dir, 'broken.json');
    await writeFile(job, '{\n  "name": "x",\n  "datasets": {\n    "transactions": { "addresses": ["0xab",] }\n  }\n}\n');
    // Refused before any command runs: in this process.
    const r = await runCliInProcess(['run', job]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`job file error: ${job}: not valid JSON at line 4, column 44: unexpected "]"`);
    await writeFile(job, '{\n  "name": "x",\n  "datasets": {\n');
    const early = await runCliInProcess(['run', job]);
    expect(early.code).toBe(2);
    expect(early.stderr).toMatch(/not valid JSON at line 4, column 1: the file ends early/);
  });

  it('a mixed-case address with a wrong EIP-55 checksum is refused; a right one or all lower case passes', async () => {
    const lower = sim.examples.addresses[0]!;
    const good = toChecksumAddress(lower);
    expect(good).not.toBe(lower);
    // One letter's case flipped: the checksum no longer matches.
    const i = [...good].findIndex((c, k) => k > 1 && /[a-f]/.test(c));
    const bad = good.slice(0, i) + good[i]!.toUpperCase() + good.slice(i + 1);
    const r = await runCli(['export', 'transactions', '--address', bad], { env: env() });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--address (value 1): ${bad} is mixed-case but its EIP-55 checksum does not match (expected ${good})`);
    // The checksummed address parses (and then meets the next check: a range above the head).
    for (const a of [good, lower]) {
      const ok = await runCli(['export', 'transactions', '--address', a, '--from-block', '900000000', '--lake', path.join(dir, 'lake')], { env: env() });
      expect(ok.code, ok.stderr).toBe(2);
      expect(ok.stderr).toMatch(/blocks 900000000-head start above the chain head \(block \d+, pinned now\): nothing to fetch/);
      expect(ok.stderr).toMatch(/hint: lower --from-block/);
    }
  });

  it('export --help shows the default lake', async () => {
    const h = await runCliInProcess(['export', '--help']);
    expect(h.code).toBe(0);
    expect(h.stdout).toMatch(/--lake\s+Lake directory \[default: \$CHAINLAKE_LAKE, else data\/lake\]/);
  });
});
