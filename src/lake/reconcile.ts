/**
 * `chainlake reconcile`'s reading, either kind of lake: the lake opened as every command opens it (open.ts), the
 * balances computed by the one statement (load/read/reconcile.ts). Only where the `reconciliation` table is committed
 * is each mode's own: a local lake's commit under its lock (load/write/reconcile-lake.ts), a distributed lake's by
 * its committer (distributed/reconcile.ts).
 */
import type { LakePaths } from '../load/paths.js';
import { reconcileBalances, type GenesisAllocations, type ReconciliationRow } from '../load/read/reconcile.js';
import { reconcileUnderLock, type ReconcileLakeResult } from '../load/write/reconcile-lake.js';
import { openLakeTables, type LakeTarget } from './open.js';

/** The reconciliation of `target`'s rows, and the DuckLake snapshot it was computed over (a distributed lake's). */
export async function reconciliationOf(
  target: LakeTarget,
  opts: { genesis?: GenesisAllocations; by?: string } = {},
): Promise<{ rows: ReconciliationRow[]; snapshot?: number }> {
  const lake = await openLakeTables(target, opts.by === undefined ? {} : { by: opts.by });
  try {
    const rows = await reconcileBalances(lake.conn, { genesis: opts.genesis });
    return lake.snapshot === undefined ? { rows } : { rows, snapshot: lake.snapshot };
  } finally {
    lake.close();
  }
}

/** Reconciles a local lake and commits the `reconciliation` table: read inside the lake's lock, as its holder. */
export function reconcileLocalLake(paths: LakePaths, opts: { genesis?: GenesisAllocations } = {}): Promise<ReconcileLakeResult> {
  return reconcileUnderLock(paths, async (by) => (await reconciliationOf({ kind: 'local', lake: paths.root }, { genesis: opts.genesis, by })).rows);
}
