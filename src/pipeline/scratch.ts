/**
 * Scratch folders under the system temp directory (TMPDIR): a worker's pages before they are typed, DuckDB's
 * spill files, a stream's windows. A process removes its own when it ends; one killed first (SIGKILL, the OOM
 * killer, a node that lost power) cannot. Each folder is therefore named after its host and process, and every
 * new one first removes the folders of this host's processes that no longer exist: a worker that is killed
 * and restarted in a loop does not fill the disk.
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { processAlive } from '../load/lock.js';

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

/** A new scratch folder for `kind` (letters: worker, stream, plan…), after sweeping dead processes' folders. */
export async function makeScratch(kind: string): Promise<string> {
  if (!/^[a-z]+$/.test(kind)) throw new Error(`scratch kind must be lowercase letters: ${kind}`);
  const dir = os.tmpdir();
  await sweepDeadScratch(dir);
  return mkdtemp(path.join(dir, `${PREFIX}${kind}-${hostPart()}-${process.pid}-`));
}
