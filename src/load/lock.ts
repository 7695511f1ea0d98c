import { mkdir, open, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ChainlakeError } from '../errors.js';

export interface LockInfo {
  pid: number;
  host: string;
  runId: string;
  startedAt: string;
}

/** Another live process holds the lake. */
export class LakeLockedError extends ChainlakeError {
  constructor(
    readonly lockFile: string,
    readonly holder: LockInfo | undefined,
  ) {
    super(
      holder
        ? `the lake is locked by run ${holder.runId} (pid ${holder.pid} on ${holder.host}, since ${holder.startedAt}); lock file ${lockFile}`
        : `the lake is locked (lock file ${lockFile})`,
      { code: 'CHAINLAKE_LOCKED', hint: 'wait for that run to finish, or pass --wait to queue behind it' },
    );
  }
}

/**
 * The lake's folder cannot be used: its path is a file (or passes through one) — a usage error — or the
 * file system refuses writes (read-only mount, permissions). The raw errno text named neither the lake nor
 * what to do about it.
 */
export class LakeAccessError extends ChainlakeError {
  constructor(
    readonly root: string,
    /** The file system's refusal (EROFS, EACCES, ENOTDIR…); `code` is the chainlake code, as for every ChainlakeError. */
    readonly errno: string,
    /** True when the path itself is wrong; false when the place is not writable. Both exit 2: a person must act. */
    readonly badPath: boolean,
  ) {
    super(
      badPath
        ? `the lake path ${root} is not a directory (${errno}): give --lake (or the job's "lake") a folder`
        : `cannot write the lake at ${root} (${errno}${errno === 'EROFS' ? ': read-only file system' : errno === 'ENOSPC' ? ': no space left on the device' : ': permission denied'})`,
      { code: 'CHAINLAKE_LAKE_ACCESS', hint: badPath ? undefined : 'give --lake (or the job\'s "lake") a folder this user can write, or fix its permissions' },
    );
  }
}

const NOT_A_DIRECTORY = new Set(['EEXIST', 'ENOTDIR']);
const NOT_WRITABLE = new Set(['EROFS', 'EACCES', 'EPERM', 'ENOSPC']);

/** Maps a failed mkdir/open of the lake root or its lock file to a LakeAccessError, else rethrows. */
function accessError(root: string, e: unknown): never {
  const code = (e as NodeJS.ErrnoException).code ?? '';
  if (NOT_A_DIRECTORY.has(code)) throw new LakeAccessError(root, code, true);
  if (NOT_WRITABLE.has(code)) throw new LakeAccessError(root, code, false);
  throw e;
}

/** Whether a process of this host exists (EPERM: it does, as another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function readLock(file: string): Promise<LockInfo | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as LockInfo;
  } catch {
    return undefined;
  }
}

/**
 * One run per lake at a time: an exclusive-create lock file holding the owner's pid and host. A lock whose
 * process is gone (same host) is stale and taken over; a lock from another host is respected.
 */
export class LakeLock {
  private constructor(readonly file: string) {}

  static async acquire(lakeRoot: string, runId: string): Promise<LakeLock> {
    await mkdir(lakeRoot, { recursive: true }).catch((e: unknown) => accessError(lakeRoot, e));
    const file = path.join(lakeRoot, '.chainlake.lock');
    const info: LockInfo = { pid: process.pid, host: os.hostname(), runId, startedAt: new Date().toISOString() };
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const fh = await open(file, 'wx');
        await fh.writeFile(JSON.stringify(info));
        await fh.close();
        return new LakeLock(file);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') accessError(lakeRoot, e);
      }
      const holder = await readLock(file);
      // An unreadable lock is either being written right now or was left by a writer killed between
      // create and write: give it a few seconds before calling it stale.
      const stale =
        holder === undefined
          ? Date.now() -
              (await stat(file).then(
                (s) => s.mtimeMs,
                () => 0,
              )) >
            5000
          : holder.host === info.host && !processAlive(holder.pid);
      if (stale) {
        await rm(file, { force: true });
        continue;
      }
      throw new LakeLockedError(file, holder);
    }
    throw new LakeLockedError(file, await readLock(file));
  }

  async release(): Promise<void> {
    await rm(this.file, { force: true });
  }
}
