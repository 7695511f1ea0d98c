import { existsSync, lstatSync } from 'node:fs';
import { symlink } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StageFile } from '../../src/load/write/staging.js';
import type { StagedRow } from '../../src/transform/rows.js';
import { tempDir } from '../helpers/lake.js';

// A full disk under a stage file (6b2e210): an errored write stream emits neither 'drain' nor 'finish', and
// its 'close' may already be gone, so a write, close or discard that waits for them hangs the run forever.
// /dev/full fails every write with ENOSPC as a full disk does, in milliseconds, where the end-to-end test in
// reliability/bad-input.test.ts needs a small disk to fill and is skipped where none can be made. The stage
// file is a symlink to it, so that discard (which unlinks its path) removes the link, never the device.
const DEV_FULL = '/dev/full';
let dir: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir());
});
afterAll(async () => {
  await cleanup?.();
});

/** A stage file whose writes all fail with ENOSPC. */
async function onFullDisk(name: string): Promise<StageFile> {
  const file = path.join(dir, name);
  await symlink(DEV_FULL, file);
  return StageFile.open(file, { dirExists: true });
}

const row = (i: number): StagedRow => ({ partition: '2024-01-01', values: { hash: `0x${i.toString(16).padStart(64, '0')}`, value: String(i) } });

describe.skipIf(!existsSync(DEV_FULL))('a stage file on a full disk fails, never hangs', () => {
  // Each test's timeout is the hang it guards against: a wait for an event that never comes. A write of
  // ~100 KiB, more than the stream's 16 KiB buffer, waits for 'drain'; once it has failed the stream is errored
  // and closed, and whatever the window does next (write, close or discard) must not wait for an event.
  const big = Array.from({ length: 1000 }, (_, i) => row(i));

  it('a write rejects with ENOSPC, and so does the next write, at once', { timeout: 10_000 }, async () => {
    const stage = await onFullDisk('write.ndjson');
    await expect(stage.writeRows(big)).rejects.toMatchObject({ code: 'ENOSPC' });
    await expect(stage.writeRows([row(0)])).rejects.toMatchObject({ code: 'ENOSPC' });
  });

  it('close after a failed write rejects with ENOSPC, not waiting for finish', { timeout: 10_000 }, async () => {
    const stage = await onFullDisk('close.ndjson');
    await expect(stage.writeRows(big)).rejects.toMatchObject({ code: 'ENOSPC' });
    await expect(stage.close()).rejects.toMatchObject({ code: 'ENOSPC' });
  });

  it('discard after a failed write returns, not waiting for a close already emitted, and removes the file', { timeout: 10_000 }, async () => {
    const stage = await onFullDisk('discard.ndjson');
    await expect(stage.writeRows(big)).rejects.toMatchObject({ code: 'ENOSPC' });
    await stage.discard();
    expect(() => lstatSync(path.join(dir, 'discard.ndjson'))).toThrow(/ENOENT/);
  });
});
