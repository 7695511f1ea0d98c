import { spawnSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES, LakeLockedError, QuotaReachedError, StrictRejectsError } from '../../src/index.js';
import { EXIT_OF_CODE, exitCodeOfError } from '../../src/cli/exit-codes.js';
import { runCliInProcess } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => ({ dir, cleanup } = await tempDir()));
afterAll(async () => cleanup?.());

describe('the CLI parser in-process', () => {
  it('imports without touching the process: no stream handlers, no environment change, no runtime tuning', () => {
    // A process of its own: what the import changes in a process is the point (the built module, as a user's).
    const script = `
      const before = [process.stdout.listenerCount('error'), process.stderr.listenerCount('error'), JSON.stringify(process.env), process.execArgv.length];
      const { runCli } = await import(${JSON.stringify(path.resolve('dist/cli/cli.js'))});
      const after = [process.stdout.listenerCount('error'), process.stderr.listenerCount('error'), JSON.stringify(process.env), process.execArgv.length];
      process.stdout.write(JSON.stringify({ same: JSON.stringify(before) === JSON.stringify(after), runCli: typeof runCli }));`;
    const env = { ...process.env };
    delete env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000, env });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ same: true, runCli: 'function' });
  });

  it('a bad job file exits 2 naming the file and the place, from the error code', async () => {
    const job = path.join(dir, 'bad.json');
    await writeFile(job, JSON.stringify({ target: 'simulator', datasets: { transactions: { addresses: ['0x12'] } } }));
    const r = await runCliInProcess(['run', job]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`job file error: ${job}: datasets.transactions.addresses[0]`);
    const dataset = await runCliInProcess(['describe', 'no_such_dataset']);
    expect(dataset.code).toBe(2);
    expect(dataset.stderr).toMatch(/Invalid values:[\s\S]*Given: "no_such_dataset"/);
  });

  it('an empty --lake and an unknown flag are usage errors (exit 2)', async () => {
    const empty = await runCliInProcess(['query', '--lake', ' ', 'SELECT 1']);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('--lake is empty');
    const flag = await runCliInProcess(['status', '--no-such-flag']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/unknown flag --no-such-flag\nRun 'chainlake --help' for usage/);
  });

  it('maps each code to the exit number the README documents', () => {
    expect(Object.keys(EXIT_OF_CODE).sort()).toEqual([...ERROR_CODES].sort());
    expect(exitCodeOfError(new LakeLockedError('/lake/.lock', undefined))).toBe(75);
    expect(exitCodeOfError(new QuotaReachedError(10))).toBe(4);
    expect(exitCodeOfError(new StrictRejectsError(1))).toBe(3);
    // Matched on `code`, not on the class: an error of a second copy of chainlake maps the same way.
    expect(exitCodeOfError(Object.assign(new Error('locked elsewhere'), { code: 'CHAINLAKE_LOCKED' }))).toBe(75);
    expect(exitCodeOfError(new Error('a bug'))).toBe(1);
  });
});
