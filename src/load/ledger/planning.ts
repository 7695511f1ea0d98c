/**
 * What planning a run reads of the run ledger (watermarks, the last head, the unfinished run to resume, the
 * day's request usage, the pace of the last complete run), for both kinds of lake: one SQL text over a `Ledger`
 * (`catalog.duckdb` attached on one machine, the control plane's `chainlake` schema in distributed mode). A local
 * run records its head and network in its report (JSON), a distributed one in the runs table's own columns: each
 * statement reads whichever the row has.
 */
import type { Dialect } from '../../ducklake/catalog-db.js';
import { readKept, type KeptRow, type Ledger } from './windows.js';
import { ledgerTableName } from './schema.js';
import type { VoidedClaim } from './voided.js';
import { replacedTables } from './recreated.js';
import { REJECTS_SHAPE } from '../schema.js';

/** Identity of a window across runs: the same dataset, network, scope and block range. */
export const windowKey = (dataset: string, network: string, scope: string, from: number | null, to: number | null): string =>
  `${dataset}|${network}|${scope}|${from ?? ''}|${to ?? ''}`;

export const watermarkKey = (dataset: string, network: string, scope: string): string => `${dataset}|${network}|${scope}`;

/** What an unfinished earlier run of the same job left, so this run can finish it instead of starting over. */
export interface ResumePoint {
  runId: string;
  status: string;
  /** The head that run pinned; resuming pins the same head so the windows are the same windows. */
  head: number;
  /** Windows already committed by that run (or the runs it resumed). */
  committed: Set<string>;
  /** Windows that run (or the runs it resumed) fetched and kept, no commit having taken them: this run commits them. */
  kept?: KeptRow[];
}

export interface PlanningState {
  /** Last committed block per (dataset, network, scope). */
  watermarks: Map<string, number>;
  resume?: ResumePoint;
  /** The highest head any run on this network recorded: where a search for the head starts. */
  lastHead?: number;
  /**
   * Datasets whose rows the ledger counts as loaded while the lake has no current table of them (another DuckLake
   * writer dropped it, and maybe expired its snapshots): their watermarks and resumed windows are left out of this state.
   */
  voided?: VoidedClaim[];
  /** Every window a failed run of the job kept (one machine, `resume`): those the resumed chain has not are given up. */
  kept?: KeptRow[];
}

const table = (l: Ledger, name: string): string => ledgerTableName(l.schema, name);

/** A run's head and network, from its columns (distributed) or its report (one machine). */
const RUN_HEAD = `COALESCE(head, CAST(report ->> 'head' AS BIGINT))`;
const RUN_NETWORK = `COALESCE(network, report ->> 'network')`;

/**
 * The watermarks of `network`, the highest head any run on it recorded and, with `resume`, the point to resume
 * from when the latest run of `job` did not complete (it failed, or was killed and still says `running`): the
 * windows every run of the job that pinned the same head committed. Without `resume` (the distributed mode,
 * whose unfinished runs are taken up by `enqueue` itself) no resume point is read.
 *
 * `lake`: where the lake's DuckLake catalog is beside the ledger (the attached catalog on one machine, the
 * `ducklake` schema of the control plane); the ledger's claims are then checked against it (voidClaims).
 */
export async function readLedgerState(ledger: Ledger, job: string, network: string, opts: { resume: boolean; lake?: string }): Promise<PlanningState> {
  const state = await readClaims(ledger, job, network, opts);
  if (opts.lake !== undefined) await voidClaims(ledger, opts.lake, network, state);
  return state;
}

async function readClaims(ledger: Ledger, job: string, network: string, opts: { resume: boolean }): Promise<PlanningState> {
  const state: PlanningState = { watermarks: new Map() };
  const { db } = ledger;
  for (const r of await db.query(`SELECT dataset, scope, block FROM ${table(ledger, 'watermarks')} WHERE network = $1`, [network])) {
    state.watermarks.set(watermarkKey(String(r.dataset), network, String(r.scope)), Number(r.block));
  }
  const runs = table(ledger, 'runs');
  const lastHead = (await db.query(`SELECT max(${RUN_HEAD}) AS head FROM ${runs} WHERE ${RUN_NETWORK} = $1`, [network]))[0]?.head;
  if (lastHead !== null && lastHead !== undefined) state.lastHead = Number(lastHead);
  if (!opts.resume) return state;
  const kept = await readKept(ledger, runs, job, network);
  if (kept.length) state.kept = kept;
  const last = (
    await db.query(
      `SELECT run_id, status, ${RUN_HEAD} AS head FROM ${runs} WHERE job = $1 AND ${RUN_NETWORK} = $2 ORDER BY started_at DESC, run_id DESC LIMIT 1`,
      [job, network],
    )
  )[0];
  if (!last || last.status === 'complete' || last.head === null || last.head === undefined) return state;
  const head = Number(last.head);
  // Every run of this job that pinned the same head belongs to one resume chain, less the windows of a dataset whose
  // claims a later run voided (voidClaims): the table it made again does not hold them.
  const done = await db.query(
    `SELECT w.dataset, w.scope, w.from_block, w.to_block FROM ${table(ledger, 'windows')} w JOIN ${runs} r ON r.run_id = w.run_id
     WHERE r.job = $1 AND w.network = $2 AND w.status IN ('committed', 'provisional')
       AND COALESCE(r.head, CAST(r.report ->> 'head' AS BIGINT)) = $3
       AND NOT EXISTS (SELECT 1 FROM ${runs} v WHERE v.started_at > r.started_at AND ${voidedBy(db.dialect, 'v.report', 'w.dataset')})`,
    [job, network, head],
  );
  const resume: ResumePoint = {
    runId: String(last.run_id),
    status: String(last.status),
    head,
    ...(kept.some((k) => k.head === head) ? { kept: kept.filter((k) => k.head === head) } : {}),
    committed: new Set(
      done.map((w) =>
        windowKey(
          String(w.dataset),
          network,
          String(w.scope),
          w.from_block === null ? null : Number(w.from_block),
          w.to_block === null ? null : Number(w.to_block),
        ),
      ),
    ),
  };
  state.resume = resume;
  return state;
}

/**
 * The claims of an open distributed run that `enqueue` takes up instead of planning (distributed/enqueue.ts): the
 * watermarks of `network` and the windows the run committed, voided as planning voids them (voidClaims) when another
 * DuckLake writer dropped their table since. Those windows' rows went with it; the caller fetches them again.
 */
export async function runClaimsVoided(ledger: Ledger, lake: string, network: string, runId: string): Promise<VoidedClaim[]> {
  const state = await readClaims(ledger, '', network, { resume: false });
  const done = await ledger.db.query(
    `SELECT dataset, scope, from_block, to_block FROM ${table(ledger, 'windows')} WHERE run_id = $1 AND status IN ('committed', 'provisional')`,
    [runId],
  );
  const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  state.resume = {
    runId,
    status: 'running',
    head: 0,
    committed: new Set(done.map((w) => windowKey(String(w.dataset), network, String(w.scope), num(w.from_block), num(w.to_block)))),
  };
  await voidClaims(ledger, lake, network, state);
  return state.voided ?? [];
}

/**
 * Whether the run record `report` (a run's JSON record) says the run voided the claims on `dataset` (its `voided`,
 * in its start record and its report): windows committed before it are not in the table it made again.
 */
function voidedBy(dialect: Dialect, report: string, dataset: string): string {
  return dialect === 'postgres'
    ? `EXISTS (SELECT 1 FROM jsonb_array_elements(COALESCE(${report} -> 'voided', '[]'::jsonb)) e WHERE e ->> 'dataset' = ${dataset})`
    : `COALESCE(list_contains(json_extract_string(${report}, '$.voided[*].dataset'), ${dataset}), false)`;
}

/**
 * The one decision, for both kinds of lake, on a dataset whose table the lake has no current row of while the ledger
 * counts rows of it as loaded: another DuckLake writer dropped the table (whether or not it then expired the
 * snapshots that knew it: `ducklake_expire_snapshots` deletes a dropped table's catalog rows), so the next commit
 * creates it again, empty. Following the watermarks would then fetch only the blocks after them, and the lake would
 * silently lack everything before: the claims are void, and the dataset is planned as on an empty lake (its whole
 * range, as an incremental job's first run). The dropped table's rows stay readable in the snapshots before the drop
 * until they are expired: the claim names the last one. A table another writer renamed is not voided: its rows are
 * in the renamed table, and the commit refuses it with the statement that renames it back (load/write/lake-tables.ts
 * refuseEndedTables). The run makes the void lasting before it fetches (voidWatermarks): once the table is created
 * again, nothing here could tell; the commit creates a dropped table only while the ledger has no mark of it. A table
 * emptied by a DELETE is not voided: the table and its history are there, a writer's deletes are its own to make,
 * and `chainlake verify` finds the windows whose rows are gone (`--repair` fetches them again).
 *
 * A table dropped and created again under its name (by another writer) has a current row, yet the claims went with
 * the dropped one: voided the same way (recreated.ts replacedTables, which also says how chainlake's claims on the new
 * table, once this run made them, are told from the old ones), the range fetched again merged by key into the table
 * as it is now (another writer's rows in it kept).
 */
async function voidClaims(ledger: Ledger, lake: string, network: string, state: PlanningState): Promise<void> {
  // Every network's marks count: the table holds them all, and a mark of another network left behind would hold
  // that network's next run to the blocks after it in the table made again.
  const marked = (await ledger.db.query(`SELECT DISTINCT dataset FROM ${table(ledger, 'watermarks')}`)).map((r) => String(r.dataset));
  const resumed = [...(state.resume?.committed ?? [])].map((k) => k.split('|')[0]!);
  // Another open run's committed windows claim their table too (whichever job: the table holds every run's rows), and
  // the commit weighs them (watermarks.ts unclaimed): a table they claim alone is voided as a marked one is, and the
  // enqueue that plans or takes up this run voids that run's claims with its own (distributed/enqueue.ts voidOpenRuns).
  const open = (
    await ledger.db.query(
      `SELECT DISTINCT w.dataset FROM ${table(ledger, 'windows')} w JOIN ${table(ledger, 'runs')} r ON r.run_id = w.run_id
       WHERE r.status = 'running' AND w.status IN ('committed', 'provisional')`,
    )
  ).map((r) => String(r.dataset));
  // `_rejects` claims nothing (no mark), but its drop is said where the run that creates it again is planned
  // (load/write/dropped-tables.ts): only while the catalog records it, as the table's absence alone says nothing.
  const claimed = [...new Set([...marked, ...resumed, ...open, REJECTS_SHAPE.name])];
  // Each claimed name's catalog rows, newest first, with the name its table id has now (a rename's) and, for an
  // ended row, the last snapshot still kept that has it.
  const rows = await ledger.db.query(
    `SELECT t.table_name, t.end_snapshot,
            (SELECT n.table_name FROM ${lake}.ducklake_table n WHERE n.table_id = t.table_id AND n.end_snapshot IS NULL) AS now,
            (SELECT max(p.snapshot_id) FROM ${lake}.ducklake_snapshot p WHERE p.snapshot_id >= t.begin_snapshot AND p.snapshot_id < t.end_snapshot) AS readable
     FROM ${lake}.ducklake_table t JOIN ${lake}.ducklake_schema s ON s.schema_id = t.schema_id AND s.schema_name = 'main'
     WHERE t.table_name IN (SELECT unnest(CAST($1 AS VARCHAR[])))
     ORDER BY t.end_snapshot DESC NULLS FIRST`,
    [claimed],
  );
  const fate = new Map<string, { dropped?: number; readable?: number; recreated?: number } | 'kept'>();
  for (const r of rows) {
    const name = String(r.table_name);
    if (fate.has(name)) continue;
    // A current row, or a table renamed (its rows kept under another name, refused by the commit): claims stand.
    if (r.end_snapshot === null || r.end_snapshot === undefined || (r.now !== null && r.now !== undefined)) fate.set(name, 'kept');
    else fate.set(name, { dropped: Number(r.end_snapshot), ...(r.readable === null || r.readable === undefined ? {} : { readable: Number(r.readable) }) });
  }
  const voided: VoidedClaim[] = [];
  const rejects = fate.get(REJECTS_SHAPE.name);
  if (rejects === 'kept' || rejects === undefined) fate.set(REJECTS_SHAPE.name, 'kept');
  // A current row is not enough: another writer may have dropped the table the claims were made on and created
  // another of the name (recreated.ts says how chainlake tells its own claims on the new table from the old ones).
  const kept = claimed.filter((d) => d !== REJECTS_SHAPE.name && fate.get(d) === 'kept');
  for (const [name, { dropped, readable, recreated }] of await replacedTables(ledger, lake, kept))
    fate.set(name, { dropped, recreated, ...(readable === undefined ? {} : { readable }) });
  for (const dataset of claimed.filter((d) => fate.get(d) !== 'kept').sort()) {
    const prefix = watermarkKey(dataset, network, '');
    const marks = [...state.watermarks].filter(([k]) => k.startsWith(prefix));
    for (const [k] of marks) state.watermarks.delete(k);
    const windows = [...(state.resume?.committed ?? [])].filter((k) => k.startsWith(`${dataset}|`));
    for (const k of windows) state.resume!.committed.delete(k);
    const drop = fate.get(dataset);
    voided.push({
      dataset,
      scopes: marks.length,
      block: marks.length ? Math.max(...marks.map(([, b]) => b)) : null,
      windows: windows.length,
      ...(drop && drop !== 'kept' ? drop : {}),
    });
  }
  if (voided.length) state.voided = voided;
}

/** Requests sent per UTC day (YYYY-MM-DD) for `account`, by every run (or worker) the ledger recorded. */
export async function readRequestUsage(ledger: Ledger, account: string): Promise<Map<string, number>> {
  const rows = await ledger.db.query(
    `SELECT CAST(day AS VARCHAR) AS day, CAST(sum(requests) AS BIGINT) AS n FROM ${table(ledger, 'request_usage')} WHERE account = $1 GROUP BY day`,
    [account],
  );
  return new Map(rows.map((r) => [String(r.day).slice(0, 10), Number(r.n)]));
}

/** The requests and seconds of a complete run: the pace a plan estimates its duration with. */
export interface RunPace {
  runId: string;
  requests: number;
  seconds: number;
}

/**
 * The job's last complete run with at least `minRequests` requests, from its report (a distributed run has
 * none: its pace is its workers', not one process's), or undefined.
 */
export async function readLastRunPace(ledger: Ledger, job: string, network: string, minRequests = 20): Promise<RunPace | undefined> {
  const requests = `CAST(report -> 'totals' ->> 'requests' AS BIGINT)`;
  const row = (
    await ledger.db.query(
      `SELECT run_id, ${requests} AS requests, CAST(report ->> 'durationMs' AS BIGINT) AS ms FROM ${table(ledger, 'runs')}
       WHERE job = $1 AND status = 'complete' AND ${RUN_NETWORK} = $2 AND ${requests} >= $3
       ORDER BY started_at DESC LIMIT 1`,
      [job, network, minRequests],
    )
  )[0];
  return row ? { runId: String(row.run_id), requests: Number(row.requests), seconds: Number(row.ms) / 1000 } : undefined;
}
