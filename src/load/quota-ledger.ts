import { renameSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { RequestUsage } from './catalog.js';

/**
 * A run's request reservations under a daily quota (extract/quota.ts), kept in its staging folder: when the
 * run dies between commits, recovery records them as spent (recoverLake), so the next run cannot spend them
 * again. A live run records what it actually sent with its commits, and its staging goes with it.
 */
export const QUOTA_LEDGER_FILE = 'quota-reserved.json';

/**
 * Writes the reservations synchronously (the request they cover waits for it), replacing the file whole
 * (rename), so a kill mid-write leaves the previous reservation, never a torn one. No fsync: the file has to
 * survive the process, not the machine (a lost machine loses its staging folder with it).
 */
export function ledgerWriter(stagingDir: string, account: string): (days: Readonly<Record<string, number>>) => void {
  const file = path.join(stagingDir, QUOTA_LEDGER_FILE);
  return (days) => {
    const usage: RequestUsage = { account, days: { ...days } };
    writeFileSync(`${file}.tmp`, JSON.stringify(usage));
    renameSync(`${file}.tmp`, file);
  };
}

/** A dead run's reservations, if it wrote any. */
export async function readLedger(stagingDir: string): Promise<RequestUsage | undefined> {
  try {
    const u = JSON.parse(await readFile(path.join(stagingDir, QUOTA_LEDGER_FILE), 'utf8')) as RequestUsage;
    return typeof u.account === 'string' && u.days !== null && typeof u.days === 'object' ? u : undefined;
  } catch {
    return undefined;
  }
}
