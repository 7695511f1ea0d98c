/**
 * A run's row in the one ledger's `runs` (schema.ts), for both kinds of lake: one SQL text over a `Ledger`
 * (`catalog.duckdb` on one machine, the control plane's `chainlake` schema in distributed mode). A local run
 * records itself here as it starts and with each commit; a run that is no export (`chainlake decode`) records
 * itself here on either kind of lake.
 */
import { ident } from '../../ducklake/ddl.js';
import { sqlType } from './schema.js';
import type { Ledger } from './windows.js';

export interface RunRecord {
  runId: string;
  job: string;
  startedAt: string;
  finishedAt: string | null;
  status: string;
  /** The run's report (JSON); null for none. */
  report: unknown;
}

/** Writes the run's row, or replaces what an earlier record of the same run wrote (its columns other than these stay). */
export async function recordRun(ledger: Ledger, run: RunRecord): Promise<void> {
  const table = ledger.schema ? `${ident(ledger.schema)}.runs` : 'runs';
  await ledger.db.query(
    `INSERT INTO ${table} (run_id, job, started_at, finished_at, status, report)
     VALUES ($1, $2, CAST($3 AS TIMESTAMPTZ), CAST($4 AS TIMESTAMPTZ), $5, CAST($6 AS ${sqlType(ledger.db.dialect, 'json')}))
     ON CONFLICT (run_id) DO UPDATE SET job = EXCLUDED.job, started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at,
       status = EXCLUDED.status, report = EXCLUDED.report`,
    [run.runId, run.job, run.startedAt, run.finishedAt, run.status, JSON.stringify(run.report ?? null)],
  );
}
