import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * Durability helpers. A rename is atomic for readers, but after a power loss it may have reached the disk
 * before the renamed file's data did (or not at all): the data is fsynced before the rename and the
 * folder after it, the classic order that makes "rename into place" a real commit.
 */

export async function fsyncFile(file: string): Promise<void> {
  const fh = await open(file, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Persists a folder's entries (a rename or create inside it). Some filesystems refuse it: not fatal. */
export async function fsyncDir(dir: string): Promise<void> {
  let fh;
  try {
    fh = await open(dir, 'r');
    await fh.sync();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'EISDIR' && code !== 'EINVAL' && code !== 'EPERM' && code !== 'EBADF') throw e;
  } finally {
    await fh?.close();
  }
}

/** mkdir -p that also persists every folder it created (and the entry of the first one in its parent). */
export async function mkdirDurable(dir: string): Promise<void> {
  const first = await mkdir(dir, { recursive: true });
  if (first === undefined) return;
  let d = path.resolve(dir);
  const stop = path.dirname(path.resolve(first));
  while (true) {
    await fsyncDir(d);
    if (d === stop || path.dirname(d) === d) break;
    d = path.dirname(d);
  }
}

/** Writes `data` to `file` and syncs it to the disk before returning. */
export async function writeSynced(file: string, data: string | Buffer): Promise<void> {
  const fh = await open(file, 'w');
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Writes a small file so that it is either absent or whole, even after a crash or power loss. */
export async function writeFileDurable(file: string, data: string): Promise<void> {
  const tmp = `${file}.tmp`;
  await writeSynced(tmp, data);
  await rename(tmp, file);
  await fsyncDir(path.dirname(file));
}

export const exists = (file: string): Promise<boolean> =>
  stat(file).then(
    () => true,
    () => false,
  );

/** Removes a file and persists the removal. */
export async function removeDurable(file: string): Promise<void> {
  await rm(file, { force: true });
  await fsyncDir(path.dirname(file));
}
