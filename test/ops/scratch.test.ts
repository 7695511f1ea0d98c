import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeScratch } from '../../src/load/scratch.js';
import { tempDir } from '../helpers/lake.js';

/** A process id that existed a moment ago and no longer does. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', '']);
  expect(r.status).toBe(0);
  return r.pid;
}

describe('scratch folders', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  const before = process.env.TMPDIR;
  beforeEach(async () => {
    ({ dir, cleanup } = await tempDir('chainlake-scratch-test-'));
    process.env.TMPDIR = dir;
  });
  afterEach(async () => {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    await cleanup();
  });

  it("a new one removes those of this host's dead processes, and nothing else", async () => {
    const host = os.hostname().replace(/[^A-Za-z0-9.-]/g, '_');
    const dead = path.join(dir, `chainlake-worker-${host}-${deadPid()}-aB3xY9`);
    const deadStream = path.join(dir, `chainlake-stream-${host}-${deadPid()}-Qq1Zz0`);
    const live = path.join(dir, `chainlake-worker-${host}-${process.pid}-Zz9Yy8`);
    // Another host's processes are not visible from this one: its folders are never judged from here.
    const otherHost = path.join(dir, `chainlake-worker-another-host-${deadPid()}-Mm2Nn3`);
    const unrelated = [path.join(dir, 'chainlake-crash-k2J9sd'), path.join(dir, 'someone-else-123-abcdef')];
    for (const d of [dead, deadStream, live, otherHost, ...unrelated]) {
      await mkdir(path.join(d, 'slot-0'), { recursive: true });
      await writeFile(path.join(d, 'slot-0', 'page.json'), '{}');
    }

    const mine = await makeScratch('worker');
    expect(path.dirname(mine)).toBe(dir);
    expect(path.basename(mine)).toMatch(new RegExp(`^chainlake-worker-${host.replace(/\./g, '\\.')}-${process.pid}-[A-Za-z0-9]{6}$`));
    expect(existsSync(dead)).toBe(false);
    expect(existsSync(deadStream)).toBe(false);
    for (const d of [live, otherHost, ...unrelated, mine]) expect(existsSync(d), d).toBe(true);
    expect((await readdir(dir)).sort()).toEqual([live, otherHost, ...unrelated, mine].map((d) => path.basename(d)).sort());
  });

  it('a worker killed with SIGKILL leaves its folder, and the next one on the host removes it', async () => {
    // A real process of our own code: node runs the built module, makes its scratch and is killed before cleanup.
    const built = path.resolve('dist/load/scratch.js');
    const child = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { makeScratch } = await import(${JSON.stringify(built)}); await makeScratch('worker'); process.kill(process.pid, 'SIGKILL');`,
      ],
      { env: { ...process.env, TMPDIR: dir } },
    );
    expect(child.signal).toBe('SIGKILL');
    const left = await readdir(dir);
    expect(left).toHaveLength(1);
    expect(left[0]).toMatch(new RegExp(`^chainlake-worker-.+-${child.pid}-`));

    const next = await makeScratch('worker');
    expect(await readdir(dir)).toEqual([path.basename(next)]);
  });

  it('refuses a kind that would make the name ambiguous', async () => {
    await expect(makeScratch('Worker-1')).rejects.toThrow(/lowercase letters/);
  });
});
