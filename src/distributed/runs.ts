/**
 * A distributed run's end. A run is closed once every window of it has ended, committed or failed for good, with
 * the status words of a single-machine run (RunReport.status): `complete`, `partial` (some windows failed, others
 * committed) or `failed` (every window failed). A closed run is history: the next `enqueue` of its job plans anew
 * from the watermarks, as the next single-machine run fetches what the last one did not.
 */
import type { RunReport } from '../pipeline/report.js';
import { blockTimesTable } from '../load/ledger/block-times.js';
import { CONTROL_SCHEMA } from './control-plane.js';

/** The single machine's words, checked against its type: one vocabulary for every run a user reads. */
export const RUN_COMPLETE: RunReport['status'] = 'complete';
export const RUN_PARTIAL: RunReport['status'] = 'partial';
export const RUN_FAILED: RunReport['status'] = 'failed';
/** A run whose windows are not all over (a single-machine run records the same word while it runs). */
export const RUN_RUNNING = 'running';

/** Runs a statement on whatever connection the caller holds (a pg client, a CatalogDb in a transaction). */
export type Execute = (text: string, values: string[][]) => Promise<unknown>;

/**
 * Closes those of `runIds` whose windows have all ended, inside the caller's transaction, and deletes their block times
 * (load/ledger/block-times.ts). The run rows are locked
 * first (in one order), and whoever changes a window's state under its run's lock (a worker giving a window up,
 * an enqueue offering failed windows again) takes the same lock: the last of them to end a window sees every
 * other's change, so a run can neither stay open with all its windows ended nor be closed with one re-offered.
 */
export async function closeEndedRuns(execute: Execute, runIds: readonly string[]): Promise<void> {
  if (runIds.length === 0) return;
  const ids = [...new Set(runIds)].sort();
  await lockRuns(execute, ids);
  await execute(
    `UPDATE ${CONTROL_SCHEMA}.runs r SET finished_at = NOW(),
       status = CASE
         WHEN NOT EXISTS (SELECT 1 FROM ${CONTROL_SCHEMA}.windows w WHERE w.run_id = r.run_id AND w.status = 'failed') THEN '${RUN_COMPLETE}'
         WHEN EXISTS (SELECT 1 FROM ${CONTROL_SCHEMA}.windows w WHERE w.run_id = r.run_id AND w.status IN ('committed', 'provisional')) THEN '${RUN_PARTIAL}'
         ELSE '${RUN_FAILED}' END
     WHERE r.run_id = ANY($1::text[]) AND r.finished_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM ${CONTROL_SCHEMA}.windows w WHERE w.run_id = r.run_id AND w.status IN ('queued', 'fetched'))`,
    [ids],
  );
  // A closed run's block times are read by no one (a time is never reused by another run, and a run opened again
  // asks afresh): they go in the transaction that closes it, or the table would grow with every run.
  await execute(
    `DELETE FROM ${blockTimesTable(CONTROL_SCHEMA)} b USING ${CONTROL_SCHEMA}.runs r
     WHERE b.run_id = r.run_id AND r.run_id = ANY($1::text[]) AND r.finished_at IS NOT NULL`,
    [ids],
  );
}

/** Locks run rows until the caller's transaction ends (see closeEndedRuns). */
export async function lockRuns(execute: Execute, runIds: readonly string[]): Promise<void> {
  await execute(`SELECT run_id FROM ${CONTROL_SCHEMA}.runs WHERE run_id = ANY($1::text[]) ORDER BY run_id FOR UPDATE`, [[...runIds].sort()]);
}
