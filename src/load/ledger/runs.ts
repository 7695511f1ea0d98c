/**
 * A run's row in the one ledger's `runs` (schema.ts), for both kinds of lake: one SQL text over a `Ledger`
 * (`catalog.duckdb` on one machine, the control plane's `chainlake` schema in distributed mode). A local run
 * records itself here as it starts and with each commit; a run that is no export (`chainlake decode`) records
 * itself here on either kind of lake.
 */
import { ledgerTableName, sqlType } from './schema.js';
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

/**
 * The network, head and range a report names, for the columns a distributed run fills at enqueue: a local run's
 * row gets them from its report, so `SELECT … FROM runs WHERE network = …` finds a run of either kind.
 */
function reportFacts(report: unknown): [string | null, number | null, number | null, number | null] {
  const r = (typeof report === 'object' && report !== null ? report : {}) as {
    network?: unknown;
    head?: unknown;
    range?: { from?: unknown; to?: unknown } | null;
  };
  const int = (v: unknown): number | null => (Number.isSafeInteger(v) ? (v as number) : null);
  return [typeof r.network === 'string' ? r.network : null, int(r.head), int(r.range?.from), int(r.range?.to)];
}

/**
 * Writes the run's row, or replaces what an earlier record of the same run wrote (its columns other than these stay;
 * network, head and range once known stay too: a final report need not repeat them).
 */
export async function recordRun(ledger: Ledger, run: RunRecord): Promise<void> {
  const table = ledgerTableName(ledger.schema, 'runs');
  const kept = ['network', 'head', 'range_from', 'range_to'].map((c) => `${c} = COALESCE(EXCLUDED.${c}, ${table}.${c})`).join(', ');
  await ledger.db.query(
    `INSERT INTO ${table} (run_id, job, started_at, finished_at, status, report, network, head, range_from, range_to)
     VALUES ($1, $2, CAST($3 AS TIMESTAMPTZ), CAST($4 AS TIMESTAMPTZ), $5, CAST($6 AS ${sqlType(ledger.db.dialect, 'json')}), $7, $8, $9, $10)
     ON CONFLICT (run_id) DO UPDATE SET job = EXCLUDED.job, started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at,
       status = EXCLUDED.status, report = EXCLUDED.report, ${kept}`,
    [run.runId, run.job, run.startedAt, run.finishedAt, run.status, JSON.stringify(run.report ?? null), ...reportFacts(run.report)],
  );
}

/**
 * Records as `abandoned` every run but `current` that still says `running`, on a lake whose runs are alive only while
 * their process holds the lake's lock (one machine: load/lock.ts), called under that lock: no other run is alive then.
 * A run killed with its staging folder (recovery.ts finds it there and records it so) and one whose staging is gone
 * end alike: without this, the second would say `running` for ever, and the windows it committed would count as a
 * live run's claims (load/write/dropped-tables.ts: a dropped table would never be created again). Returns their ids.
 * A distributed run's liveness is its workers' (the control plane), never this.
 */
export async function abandonRunning(ledger: Ledger, current: string | undefined): Promise<string[]> {
  const table = ledgerTableName(ledger.schema, 'runs');
  const dead = (await ledger.db.query(`SELECT run_id FROM ${table} WHERE status = 'running' AND run_id <> $1 ORDER BY run_id`, [current ?? ''])).map((r) =>
    String(r.run_id),
  );
  if (dead.length) await ledger.db.query(`UPDATE ${table} SET status = 'abandoned' WHERE run_id IN (SELECT unnest(CAST($1 AS VARCHAR[])))`, [dead]);
  return dead;
}
