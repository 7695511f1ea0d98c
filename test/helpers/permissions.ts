import { spawnSync } from 'node:child_process';
import { chmod, readdir, stat } from 'node:fs/promises';
import path from 'node:path';

/** Makes a tree read-only (files 0444, folders `mode`), or writable again with 0755. */
export async function lockDown(p: string, mode: number): Promise<void> {
  for (const e of await readdir(p)) {
    const f = path.join(p, e);
    if ((await stat(f)).isDirectory()) await lockDown(f, mode);
    else await chmod(f, mode === 0o755 ? 0o644 : 0o444);
  }
  await chmod(p, mode);
}

/** Options that run a child as the unprivileged user `nobody` when the tests run as root (where modes stop nothing). */
export function unprivileged(): { uid?: number; gid?: number } {
  return process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
}

/**
 * Whether an unprivileged child can run this checkout's build with this Node binary: as root it runs as
 * `nobody`, who must be able to reach both (a checkout or a Node binary under a private 0700 folder is out of
 * its reach; tests that need it are then skipped, saying why, rather than failing on the machine's layout).
 */
export function unprivilegedCanRun(): boolean {
  const who = unprivileged();
  if (who.uid === undefined) return true;
  const probe = `require('node:fs').accessSync(${JSON.stringify(path.resolve('dist/index.js'))}, require('node:fs').constants.R_OK)`;
  const r = spawnSync(process.execPath, ['-e', probe], { ...who, cwd: '/', timeout: 30_000 });
  if (r.status !== 0) process.stderr.write(`skipping read-only-lake tests: user nobody cannot run ${process.execPath} on ${path.resolve('dist')}\n`);
  return r.status === 0;
}
