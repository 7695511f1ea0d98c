import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatStatus } from '../../src/cli/commands/status.js';
import type { LakeStatus } from '../../src/load/read/status.js';
import { runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

// Issue 37: `status` fits a terminal's width (full lines for a pipe), and says how much disk files that only older snapshots reference hold, and what frees it.
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

describe('chainlake status: the terminal width', () => {
  const error = `account_transactions: gave up after 5 attempts; last: HTTP 503 url=http://127.0.0.1:9/v1/accounts/0x${'ab'.repeat(20)}/transactions`;
  const status: LakeStatus = {
    lake: '/srv/lake',
    pendingCommit: false,
    datasets: [{ dataset: 'transactions', network: 'mainnet', partitions: 3, files: 3, rows: 1234, bytes: 56789, min_block: 0, max_block: 99_999 }],
    missingFiles: [],
    oldSnapshots: { files: 0, bytes: 0 },
    strayPartitions: [],
    runs: [],
    watermarks: [],
    gaps: [],
    fetchedWindows: [],
    uncoveredFailures: [
      {
        run_id: 'run-20261127-0001',
        network: 'mainnet',
        dataset: 'transactions',
        scope: `address=0x${'cd'.repeat(20)}`,
        from_block: 100_000,
        to_block: 199_999,
        error,
      },
    ],
  };

  it('on a terminal every line fits its columns, numbers whole; for a pipe the lines stay whole', () => {
    const fitted = formatStatus(status, 80);
    for (const line of fitted.split('\n')) expect(line.length, line).toBeLessThanOrEqual(80);
    expect(fitted).toContain('199999');
    expect(fitted).toContain('…');
    expect(fitted).toContain('| account…');
    const full = formatStatus(status);
    expect(full).toContain(error);
    expect(Math.max(...full.split('\n').map((l) => l.length))).toBeGreaterThan(200);
  });
});
