/**
 * Scratch folders under the system temp directory (TMPDIR): a worker's pages before they are typed, DuckDB's
 * spill files, a stream's windows. A process removes its own when it ends; one killed first (SIGKILL, the OOM
 * killer, a node that lost power) cannot. Each folder is therefore named after its host and process, and every
 * new one first removes the folders of this host's processes that no longer exist: a worker that is killed
 * and restarted in a loop does not fill the disk.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { processAlive } from './lock.js';
import { bugError } from '../errors.js';

const PREFIX = 'chainlake-';
/** mkdtemp's suffix: six characters. */
const NAME = /^chainlake-([a-z]+)-(.+)-(\d+)-[A-Za-z0-9]{6}$/;

/** The host as it appears in a folder's name (a hostname is letters, digits, dots and dashes). */
function hostPart(): string {
  return os.hostname().replace(/[^A-Za-z0-9.-]/g, '_') || 'host';
}

/**
 * Removes the scratch folders left by this host's dead processes. Only folders named by
 * makeScratch on this host are considered: another host (a container sharing the directory) has processes this
 * one cannot see, and folders of other tools are never touched. Best effort: what cannot be read or removed is
 * left for the next time.
 */
async function sweepDeadScratch(dir: string): Promise<void> {
  const host = hostPart();
  const names = await readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    const m = NAME.exec(name);
    if (!m || m[2] !== host) continue;
    if (processAlive(Number(m[3]))) continue;
    await rm(path.join(dir, name), { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The start of a scratch folder's name for `kind` (letters: worker, stream, plan…); six characters complete it. */
function scratchPrefix(kind: string): string {
  if (!/^[a-z]+$/.test(kind)) throw bugError(`scratch kind must be lowercase letters: ${kind}`);
  return path.join(os.tmpdir(), `${PREFIX}${kind}-${hostPart()}-${process.pid}-`);
}

/** A new scratch folder for `kind`, after sweeping dead processes' folders. */
export async function makeScratch(kind: string): Promise<string> {
  await sweepDeadScratch(os.tmpdir());
  return mkdtemp(scratchPrefix(kind));
}

/**
 * A scratch folder's path for `kind`, not created: for a program that makes it only when it needs it (DuckDB's
 * temp_directory). Named as makeScratch names its folders, so that the sweep removes it once its process is dead.
 */
export function scratchPath(kind: string): string {
  return scratchPrefix(kind) + randomBytes(3).toString('hex');
}
