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
