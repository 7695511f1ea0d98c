import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

// Issue 37: `status` says how much disk files that only older snapshots reference hold, and what frees it.
let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => ({ dir, cleanup } = await tempDir()));
afterAll(async () => cleanup?.());

interface Old {
  oldSnapshots: { files: number; bytes: number };
}

describe('chainlake status: old snapshots', () => {
  it('counts the files only older snapshots reference, and none once maintain expired them', async () => {
    const lake = path.join(dir, 'lake');
    // The same snapshot day twice: the second export replaces the day's file, the first stays for time travel.
    for (let i = 0; i < 2; i++) expect((await runCli(['export', 'dashboard', '--simulator', '--lake', lake, '-q'])).code).toBe(0);
    const json = await runCli(['status', '--lake', lake, '--format', 'json']);
    expect(json.code).toBe(0);
    const before = (JSON.parse(json.stdout) as Old).oldSnapshots;
    expect(before.files).toBe(1);
    expect(before.bytes).toBeGreaterThan(0);
    const text = await runCli(['status', '--lake', lake]);
    expect(text.stdout).toMatch(
      /^old snapshots: 1 file, [\d.]+ (B|KiB), that only snapshots older than the newest reference \(time travel\); run `chainlake maintain` to free them$/m,
    );

    expect((await runCli(['maintain', '--lake', lake, '--keep-snapshots', '1'])).code).toBe(0);
    const after = await runCli(['status', '--lake', lake, '--format', 'json']);
    expect((JSON.parse(after.stdout) as Old).oldSnapshots).toEqual({ files: 0, bytes: 0 });
    expect((await runCli(['status', '--lake', lake])).stdout).not.toContain('old snapshots');
  }, 180_000);
});
