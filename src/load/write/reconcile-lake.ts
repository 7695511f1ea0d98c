// `chainlake reconcile` on a local lake: the reconciliation computed over the lake opened as every command opens it
// (lake/reconcile.ts, inside the lock taken here), then committed
// as the derived `reconciliation` table through the lake's commit protocol (the decoded datasets' path: each
// touched snapshot day merged with what it holds, one row per (address, asset), the journal published, then
// applied under the catalog), as a run of its own recorded in `runs`.

import path from 'node:path';
import { mkdir } from 'node:fs/promises';
import type { Network } from '../../datasets/dataset.js';
import { Catalog } from '../catalog.js';
import { preparePartition, type PreparedFile } from './commit.js';
import { journalFor, lakeStateFor, replacedTables } from './commit-run.js';
import { openEngine } from '../engine.js';
import { newMaintenanceId } from '../ids.js';
import { decideAndApply, preparedAgain } from './journal.js';
import type { LakeState } from './lake-state.js';
import { LakeLock } from '../lock.js';
import type { LakePaths } from '../paths.js';
import { recoverLake } from './recovery.js';
import { ident, literal } from '../sql.js';
import { STAGED_PARTITION } from '../schema.js';
import type { DuckDBConnection } from '@duckdb/node-api';
import { closeRunStaging, openRunStaging } from './staging.js';
import type { RunRecord } from '../ledger/runs.js';
import { RECONCILIATION_SHAPE, RECONCILIATION_TABLE, summarize, type ReconcileSummary, type ReconciliationRow } from '../read/reconcile.js';

const JOB = '(reconcile)';
/** DECIMAL(38,0) holds integers of fewer than 39 digits; larger ones go to the `_raw` column. */
const LIMIT = 10n ** 38n;
const INSERT_BATCH_ROWS = 500;

const amountSql = (v: bigint | null): string[] => {
  if (v === null) return ['NULL', 'NULL'];
  const fits = v < LIMIT && v > -LIMIT;
  return fits ? [`${v}::DECIMAL(38,0)`, 'NULL'] : ['NULL', literal(v.toString())];
};

/** The table's row of a reconciliation, in RECONCILIATION_SHAPE's column order, then network and partition. */
function rowSql(r: ReconciliationRow, runId: string, ingestedAt: string): string {
  return `(${[
    literal(r.address),
    literal(r.asset),
    r.atBlock === null ? 'NULL' : String(r.atBlock),
    ...amountSql(r.reported),
    ...amountSql(r.computed),
    ...amountSql(r.difference),
    r.outcome === 'reconciled' ? 'true' : 'false',
    literal(r.outcome),
    r.reason === null ? 'NULL' : literal(r.reason),
    String(r.rows),
    literal(runId),
    `CAST(${literal(ingestedAt)} AS TIMESTAMPTZ)`,
    literal(r.network),
    literal(r.snapshotDate),
  ].join(', ')})`;
}

/**
 * The reconciliation's rows as a temp table `table` of `conn`: RECONCILIATION_SHAPE's columns, then `network` and
 * the staged partition (the snapshot day). Both kinds of lake commit the table from it (here, and
 * distributed/reconcile.ts).
 */
export async function reconciliationTable(
  conn: DuckDBConnection,
  table: string,
  rows: readonly ReconciliationRow[],
  runId: string,
  ingestedAt: string,
): Promise<void> {
  const cols = [...RECONCILIATION_SHAPE.columns.map((c) => `${ident(c.name)} ${c.type}`), 'network VARCHAR', `${ident(STAGED_PARTITION)} VARCHAR`];
  await conn.run(`CREATE TEMP TABLE ${ident(table)} (${cols.join(', ')})`);
  for (let i = 0; i < rows.length; i += INSERT_BATCH_ROWS) {
    const batch = rows.slice(i, i + INSERT_BATCH_ROWS).map((r) => rowSql(r, runId, ingestedAt));
    await conn.run(`INSERT INTO ${ident(table)} VALUES ${batch.join(', ')}`);
  }
}

export interface ReconcileLakeResult extends ReconcileSummary {
  runId: string;
  files: number;
  differing: ReconciliationRow[];
  rowsOut: ReconciliationRow[];
}

/** A reconciliation's row in `runs`, on either kind of lake: a run of its own, complete once its table is committed. */
export function reconcileRun(runId: string, startedAt: string, report: ReconcileSummary & { files: number }): RunRecord {
  // Totals as every run's report has them (`status`, `report`): the balances written, no request sent.
  const totals = { rows: report.balances, rejects: 0, requests: 0 };
  return { runId, job: JOB, startedAt, finishedAt: new Date().toISOString(), status: 'complete', report: { ...report, totals } };
}

/**
 * Commits a local lake's `reconciliation` table under the lake's lock, after recovery: `compute` reads the lake
 * inside the lock as its holder `by` (lake/reconcile.ts opens it as every command does) and returns the rows.
 */
export async function reconcileUnderLock(paths: LakePaths, compute: (by: string) => Promise<ReconciliationRow[]>): Promise<ReconcileLakeResult> {
  const runId = newMaintenanceId('reconcile');
  const lock = await LakeLock.acquire(paths.root, runId);
  try {
    await recoverLake(paths, { currentRunId: runId, by: runId });
    const staging = paths.staging(runId);
    const startedAt = new Date().toISOString();
    await openRunStaging(staging, { runId, job: JOB, startedAt, pid: process.pid });
    try {
      const rows = await compute(runId);
      const summary = summarize(rows);
      // The view is declared before the commit refreshes the views, so an empty reconciliation is queryable too.
      await Catalog.write(paths, (c) => c.registerTables([RECONCILIATION_TABLE]));
      // Another DuckLake writer's commit to the table since it was read: merged again from its new rows, as a run's
      // commit is prepared again.
      const report = await preparedAgain(
        (n) => path.join(staging, n === 1 ? 'reconcile' : `reconcile-${n}`),
        async (workDir) => {
          await mkdir(workDir, { recursive: true });
          const engine = await openEngine({ tempDir: path.join(staging, 'duckdb-tmp') });
          const prepared: PreparedFile[] = [];
          let lake: LakeState;
          try {
            const shape = RECONCILIATION_SHAPE;
            // Partitions another DuckLake writer changed (inlined rows, deletes) are written out to be merged.
            lake = await lakeStateFor(paths, [shape], path.join(workDir, 'lake-rows'));
            await reconciliationTable(engine.conn, 'reconciliation_fresh', rows, runId, startedAt);
            const parts = [...new Set(rows.map((r) => `${r.network}\u0000${r.snapshotDate}`))].map((k) => k.split('\u0000') as [Network, string]);
            for (const [network, day] of parts) {
              const fresh = `SELECT * EXCLUDE (network, __partition) FROM reconciliation_fresh WHERE network = ${literal(network)} AND __partition = ${literal(day)}`;
              prepared.push(await preparePartition(engine, paths, lake, shape, network, day, fresh, workDir));
            }
          } finally {
            engine.close();
          }
          const report = { ...summary, files: prepared.length };
          await decideAndApply(paths, { snapshot: lake.snapshotId, tables: replacedTables(lake, prepared) }, () =>
            journalFor(paths, `${runId}/${path.basename(workDir)}`, runId, prepared, {
              run: reconcileRun(runId, startedAt, report),
              windows: [],
              watermarks: [],
            }),
          );
          return report;
        },
        { runAgain: 'nothing of this reconciliation was committed (the reconciliation table is as it was); reconciling again reads the lake anew' },
      );
      return { runId, ...report, differing: rows.filter((r) => r.outcome !== 'reconciled'), rowsOut: rows };
    } finally {
      await closeRunStaging(staging);
    }
  } finally {
    await lock.release();
  }
}
