/**
 * What `chainlake report` shows, read from a lake of either kind through the tables both kinds share: a local
 * lake's catalog, or a distributed lake's reader, whose views give the control plane's ledger the local lake's
 * columns (distributed/read.ts). One code path for both: only `openLakeTables` (lake/open.ts) knows which kind it reads.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import type { LakePaths } from '../load/paths.js';
import { REJECTS_DATASET } from '../load/schema.js';
import { lakeStatus, type LakeStatus } from '../load/read/status.js';
import { openLakeTables, type LakeTarget } from '../lake/open.js';

/** A lake to report on: a local lake's folder, or a distributed lake's control plane (and where its files are). */
export type ReportTarget = LakeTarget;

/** One window of the `windows` table, as the coverage map draws it. */
export interface CoverageWindow {
  run_id: string;
  /** Blocks on a block axis; ISO times (the run's start and end) on a time axis. */
  from: number | string;
  to: number | string;
  status: string;
  rows: number | null;
  error: string | null;
}

export interface CoverageLane {
  dataset: string;
  network: string;
  scope: string;
  /** `block` for windows with a block range, `time` for datasets fetched whole (snapshots, series). */
  axis: 'block' | 'time';
  windows: CoverageWindow[];
  /** Block ranges between committed windows that no committed window covers (block axis only). */
  gaps: { from: number; to: number }[];
}

export interface ReportRun {
  run_id: string;
  job: string;
  status: string;
  started_at: string;
  finished_at: string | null;
  duration_ms: number | null;
  rows: number | null;
  requests: number | null;
  rejects: number | null;
  windows_failed: number | null;
}

export interface LakeReportData {
  lake: string;
  kind: 'local' | 'distributed';
  generated_at: string;
  headline: {
    datasets: number;
    rows: number;
    bytes: number;
    last_run: { run_id: string; job: string; status: string; started_at: string } | null;
    failed_windows: number;
    gaps: number;
    missing_files: number;
    /** "all well", or what is wrong, in one line. */
    summary: string;
    ok: boolean;
  };
  datasets: LakeStatus['datasets'];
  coverage: CoverageLane[];
  /** Oldest first (a chart reads left to right). */
  runs: ReportRun[];
  /** Requests per UTC day: the quota's ledger where the lake keeps one, else the runs' own counts by start day. */
  requests: { source: 'ledger' | 'runs'; quota: number | null; days: { day: string; requests: number }[] };
  rows_per_day: { dataset: string; network: string; day: string; rows: number }[];
  rejects: { dataset: string; field: string; reason: string; rows: number }[];
  snapshots: {
    count: number;
    current: number | null;
    /** Bytes of the files the current snapshot lists. */
    current_bytes: number;
    /** Files and bytes only older snapshots list: on disk until `chainlake maintain` expires those snapshots. */
    old_files: number;
    old_bytes: number;
    /** The newest first, at most {@link SNAPSHOTS_LISTED}. */
    list: { snapshot_id: number; snapshot_time: string; commit_message: string | null; files_added: number; bytes_added: number }[];
  };
}

/** Runs read (the newest), and snapshots listed: a page a person scrolls, whatever the lake's age. */
export const RUNS_SHOWN = 200;
export const SNAPSHOTS_LISTED = 50;
/** Reject reasons listed (the most frequent): a reason names the value, so a bad feed has many. */
const REJECT_REASONS = 50;

/** A timestamp as ISO 8601 text in UTC (both readers set the session's time zone to UTC), what a browser parses. */
const iso = (column: string): string => `strftime(${column}, '%Y-%m-%dT%H:%M:%S.%gZ')`;

async function objects<T>(conn: DuckDBConnection, sql: string): Promise<T[]> {
  const rows = (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[];
  return rows.map(
    (r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'bigint' ? Number(v) : v instanceof Date ? v.toISOString() : v])) as T,
  );
}

async function has(conn: DuckDBConnection, name: string): Promise<boolean> {
  const r = await conn.runAndReadAll(
    `SELECT 1 FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' AND table_name = '${name}'
     UNION ALL SELECT 1 FROM duckdb_views() WHERE database_name = current_database() AND schema_name = 'main' AND view_name = '${name}'`,
  );
  return r.getRowsJS().length > 0;
}

/** The report's data of a lake (local or distributed). */
export async function gatherReport(target: ReportTarget, now: () => Date = () => new Date()): Promise<LakeReportData> {
  // Of the tables of data, `_rejects` only: the datasets' files are not read (an object store would download them).
  const { conn, lake, close } = await openLakeTables(target, { datasets: [REJECTS_DATASET] });
  try {
    return await gatherFrom(conn, lake, target.kind, now());
  } finally {
    close();
  }
}

/** The report's data from a connection that has a lake's tables (see this module's comment). */
export async function gatherFrom(conn: DuckDBConnection, lake: LakePaths | { name: string }, kind: 'local' | 'distributed', at: Date): Promise<LakeReportData> {
  const status = await lakeStatus(conn, lake, { runs: 1 });
  const runs = await runsOf(conn);
  const coverage = (await has(conn, 'windows')) ? await coverageOf(conn, status) : [];
  const requests = await requestsOf(conn);
  const rowsPerDay = await rowsPerDayOf(conn);
  const rejects = await rejectReasonsOf(conn);
  const snapshots = await snapshotsOf(conn);
  const failed = coverage.reduce((n, l) => n + l.windows.filter((w) => w.status === 'failed').length, 0);
  const last = runs.at(-1);
  const problems = problemsOf(status, last);
  return {
    lake: status.lake,
    kind,
    generated_at: at.toISOString(),
    headline: {
      datasets: new Set(status.datasets.map((d) => d.dataset)).size,
      rows: status.datasets.reduce((n, d) => n + d.rows, 0),
      bytes: status.datasets.reduce((n, d) => n + (d.bytes ?? 0), 0),
      last_run: last ? { run_id: last.run_id, job: last.job, status: last.status, started_at: last.started_at } : null,
      failed_windows: failed,
      gaps: status.gaps.length,
      missing_files: status.missingFiles.length,
      summary: runs.length === 0 ? 'no run yet' : problems.length ? problems.join('; ') : 'all well',
      ok: runs.length > 0 && problems.length === 0,
    },
    datasets: status.datasets,
    coverage,
    runs,
    requests,
    rows_per_day: rowsPerDay,
    rejects,
    snapshots,
  };
}

/** The last RUNS_SHOWN runs, oldest first, with their report's totals. */
async function runsOf(conn: DuckDBConnection): Promise<ReportRun[]> {
  if (!(await has(conn, 'runs'))) return [];
  return objects<ReportRun>(
    conn,
    `SELECT run_id, job, status, started_at, finished_at, duration_ms, rows, requests, rejects, windows_failed FROM (
         SELECT run_id, job, status, ${iso('started_at')} AS started_at, ${iso('finished_at')} AS finished_at,
                coalesce(CAST(json_extract(report, '$.durationMs') AS BIGINT), CAST(epoch_ms(finished_at) - epoch_ms(started_at) AS BIGINT)) AS duration_ms,
                CAST(json_extract(report, '$.totals.rows') AS BIGINT) AS rows, CAST(json_extract(report, '$.totals.requests') AS BIGINT) AS requests,
                CAST(json_extract(report, '$.totals.rejects') AS BIGINT) AS rejects,
                CAST(json_extract(report, '$.totals.windowsFailed') AS BIGINT) AS windows_failed, started_at AS t
         FROM runs ORDER BY started_at DESC, run_id DESC LIMIT ${RUNS_SHOWN})
       ORDER BY t, run_id`,
  );
}

/** Rows per dataset, network and day, from the newest snapshot's files. */
async function rowsPerDayOf(conn: DuckDBConnection): Promise<LakeReportData['rows_per_day']> {
  if (!(await has(conn, 'files'))) return [];
  return objects<LakeReportData['rows_per_day'][number]>(
    conn,
    `SELECT dataset, network, "partition" AS day, sum(rows)::BIGINT AS rows FROM files
     WHERE dataset <> '${REJECTS_DATASET}' AND "partition" IS NOT NULL GROUP BY ALL ORDER BY dataset, network, day`,
  );
}

/** The most frequent reasons rows were rejected. */
async function rejectReasonsOf(conn: DuckDBConnection): Promise<LakeReportData['rejects']> {
  if (!(await has(conn, REJECTS_DATASET))) return [];
  return objects<LakeReportData['rejects'][number]>(
    conn,
    `SELECT dataset, field, reason, count(*)::BIGINT AS rows FROM ${REJECTS_DATASET} GROUP BY ALL ORDER BY rows DESC, dataset, field, reason LIMIT ${REJECT_REASONS}`,
  );
}

/** What the headline says is wrong: failed windows not fetched again, gaps, missing files, a last run that did not complete. */
function problemsOf(status: LakeStatus, last: ReportRun | undefined): string[] {
  const uncovered = status.uncoveredFailures.length;
  return [
    uncovered ? `${uncovered} failed window${uncovered === 1 ? '' : 's'} not yet fetched again` : '',
    status.gaps.length ? `${status.gaps.length} gap${status.gaps.length === 1 ? '' : 's'} between committed windows` : '',
    status.missingFiles.length ? `${status.missingFiles.length} file${status.missingFiles.length === 1 ? '' : 's'} missing from disk` : '',
    last && last.status !== 'complete' && last.status !== 'compact' ? `the last run is ${last.status}` : '',
  ].filter(Boolean);
}

async function coverageOf(conn: DuckDBConnection, status: LakeStatus): Promise<CoverageLane[]> {
  const rows = await objects<{
    dataset: string;
    network: string;
    scope: string;
    run_id: string;
    from_block: number | null;
    to_block: number | null;
    started_at: string | null;
    finished_at: string | null;
    status: string;
    rows: number | null;
    error: string | null;
  }>(
    conn,
    `SELECT w.dataset, w.network, w.scope, w.run_id, w.from_block::BIGINT AS from_block, w.to_block::BIGINT AS to_block,
            ${iso('r.started_at')} AS started_at, ${iso('coalesce(w.committed_at, r.finished_at, r.started_at)')} AS finished_at,
            coalesce(w.status, 'unknown') AS status, w.rows_got::BIGINT AS rows, w.error
     FROM windows w LEFT JOIN runs r USING (run_id)
     ORDER BY w.dataset, w.network, w.scope, w.from_block NULLS FIRST, w.to_block, r.started_at, w.run_id`,
  );
  const lanes = new Map<string, CoverageLane>();
  for (const r of rows) {
    const key = JSON.stringify([r.dataset, r.network, r.scope]);
    const axis = r.from_block === null || r.to_block === null ? 'time' : 'block';
    let lane = lanes.get(key);
    if (!lane) {
      lane = { dataset: r.dataset, network: r.network, scope: r.scope, axis, windows: [], gaps: [] };
      lanes.set(key, lane);
    }
    // A scope whose windows mix both kinds (none today) is drawn on the time axis.
    if (axis === 'time') lane.axis = 'time';
    lane.windows.push({
      run_id: r.run_id,
      from: axis === 'block' ? r.from_block! : (r.started_at ?? ''),
      to: axis === 'block' ? r.to_block! : (r.finished_at ?? r.started_at ?? ''),
      status: r.status,
      rows: r.rows,
      error: r.error,
    });
  }
  for (const g of status.gaps) {
    lanes.get(JSON.stringify([g.dataset, g.network, g.scope]))?.gaps.push({ from: g.from_block, to: g.to_block });
  }
  return [...lanes.values()];
}

async function requestsOf(conn: DuckDBConnection): Promise<LakeReportData['requests']> {
  const quota = (await has(conn, 'runs'))
    ? ((
        await objects<{ quota: number | null }>(
          conn,
          `SELECT CAST(json_extract(report, '$.quota.limit') AS BIGINT) AS quota FROM runs
           WHERE json_extract(report, '$.quota.limit') IS NOT NULL ORDER BY started_at DESC LIMIT 1`,
        )
      )[0]?.quota ?? null)
    : null;
  const ledger = (await has(conn, 'request_usage'))
    ? await objects<{ day: string; requests: number }>(
        conn,
        `SELECT day::VARCHAR AS day, sum(requests)::BIGINT AS requests FROM request_usage GROUP BY ALL ORDER BY day`,
      )
    : [];
  if (ledger.length) return { source: 'ledger', quota, days: ledger };
  const days = (await has(conn, 'runs'))
    ? await objects<{ day: string; requests: number }>(
        conn,
        `SELECT started_at::DATE::VARCHAR AS day, sum(CAST(json_extract(report, '$.totals.requests') AS BIGINT))::BIGINT AS requests
         FROM runs WHERE json_extract(report, '$.totals.requests') IS NOT NULL GROUP BY ALL ORDER BY day`,
      )
    : [];
  return { source: 'runs', quota, days };
}

async function snapshotsOf(conn: DuckDBConnection): Promise<LakeReportData['snapshots']> {
  const empty: LakeReportData['snapshots'] = { count: 0, current: null, current_bytes: 0, old_files: 0, old_bytes: 0, list: [] };
  if (!(await has(conn, 'ducklake_snapshot')) || !(await has(conn, 'ducklake_data_file'))) return empty;
  const [totals] = await objects<{ count: number; current: number | null }>(
    conn,
    `SELECT count(*)::BIGINT AS count, max(snapshot_id)::BIGINT AS current FROM ducklake_snapshot`,
  );
  // Data and delete files alike: a file an old snapshot lists and the current one does not has an end snapshot.
  const [bytes] = await objects<{ current_bytes: number | null; old_files: number; old_bytes: number | null }>(
    conn,
    `SELECT sum(file_size_bytes) FILTER (WHERE end_snapshot IS NULL)::BIGINT AS current_bytes,
            count(*) FILTER (WHERE end_snapshot IS NOT NULL)::BIGINT AS old_files,
            sum(file_size_bytes) FILTER (WHERE end_snapshot IS NOT NULL)::BIGINT AS old_bytes
     FROM (SELECT file_size_bytes, end_snapshot FROM ducklake_data_file UNION ALL SELECT file_size_bytes, end_snapshot FROM ducklake_delete_file)`,
  );
  const list = await objects<LakeReportData['snapshots']['list'][number]>(
    conn,
    `SELECT s.snapshot_id::BIGINT AS snapshot_id, ${iso('s.snapshot_time')} AS snapshot_time, c.commit_message,
            count(d.data_file_id)::BIGINT AS files_added, coalesce(sum(d.file_size_bytes), 0)::BIGINT AS bytes_added
     FROM ducklake_snapshot s LEFT JOIN ducklake_snapshot_changes c USING (snapshot_id)
     LEFT JOIN ducklake_data_file d ON d.begin_snapshot = s.snapshot_id
     GROUP BY ALL ORDER BY snapshot_id DESC LIMIT ${SNAPSHOTS_LISTED}`,
  );
  return {
    count: totals?.count ?? 0,
    current: totals?.current ?? null,
    current_bytes: bytes?.current_bytes ?? 0,
    old_files: bytes?.old_files ?? 0,
    old_bytes: bytes?.old_bytes ?? 0,
    list,
  };
}
