import { existsSync } from 'node:fs';
import { retryOnLock } from './catalog.js';
import { catalogWaitMs } from './catalog-wait.js';
import type { Engine } from './engine.js';
import type { LakePaths } from './paths.js';
import { literal } from './sql.js';

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
}

export interface LakeState {
  /** Last committed block per (dataset, network, scope). */
  watermarks: Map<string, number>;
  resume?: ResumePoint;
  /** The highest head any run on this network recorded: where a search for the head starts. */
  lastHead?: number;
}

/**
 * Reads the watermarks of a network and, when the latest run of `job` did not complete (it failed, or was
 * killed and still says `running`), the point to resume from. Read-only; an absent catalog is an empty lake.
 */
export async function readLakeState(engine: Engine, paths: LakePaths, job: string, network: string): Promise<LakeState> {
  const state: LakeState = { watermarks: new Map() };
  if (!existsSync(paths.catalog)) return state;
  const conn = engine.conn;
  // A user's session or a commit may hold the file for a moment: wait, as every catalog reader does.
  await retryOnLock(() => conn.run(`ATTACH ${literal(paths.catalog)} AS chainlake_state (READ_ONLY)`), catalogWaitMs(60_000), 'reading watermarks');
  try {
    const tables = new Set(
      (await conn.runAndReadAll(`SELECT table_name FROM duckdb_tables() WHERE database_name = 'chainlake_state'`)).getRowsJS().map((r) => String(r[0])),
    );
    if (tables.has('watermarks')) {
      const rows = (
        await conn.runAndReadAll(`SELECT dataset, scope, block::BIGINT FROM chainlake_state.watermarks WHERE network = ${literal(network)}`)
      ).getRowsJS();
      for (const [dataset, scope, block] of rows) state.watermarks.set(watermarkKey(String(dataset), network, String(scope)), Number(block));
    }
    if (!tables.has('runs') || !tables.has('windows')) return state;
    const lastHead = (
      await conn.runAndReadAll(
        `SELECT max(CAST(json_extract(report, '$.head') AS BIGINT)) FROM chainlake_state.runs WHERE json_extract_string(report, '$.network') = ${literal(network)}`,
      )
    ).getRowsJS()[0]?.[0];
    if (lastHead !== null && lastHead !== undefined) state.lastHead = Number(lastHead);
    const last = (
      await conn.runAndReadAll(
        `SELECT run_id, status, CAST(json_extract(report, '$.head') AS BIGINT) AS head FROM chainlake_state.runs
         WHERE job = ${literal(job)} AND json_extract_string(report, '$.network') = ${literal(network)} ORDER BY started_at DESC, run_id DESC LIMIT 1`,
      )
    ).getRowsJS()[0];
    if (!last || last[1] === 'complete' || last[2] === null || last[2] === undefined) return state;
    const head = Number(last[2]);
    // Every run of this job that pinned the same head belongs to one resume chain.
    const done = (
      await conn.runAndReadAll(
        `SELECT w.dataset, w.scope, w.from_block, w.to_block FROM chainlake_state.windows w JOIN chainlake_state.runs r USING (run_id)
         WHERE r.job = ${literal(job)} AND w.network = ${literal(network)} AND w.status IN ('committed', 'provisional')
           AND CAST(json_extract(r.report, '$.head') AS BIGINT) = ${head}`,
      )
    ).getRowsJS();
    state.resume = {
      runId: String(last[0]),
      status: String(last[1]),
      head,
      committed: new Set(done.map(([d, s, f, t]) => windowKey(String(d), network, String(s), f === null ? null : Number(f), t === null ? null : Number(t)))),
    };
    return state;
  } finally {
    await conn.run(`DETACH chainlake_state`);
  }
}

/** Requests sent per UTC day (YYYY-MM-DD) for `account`, by every run the catalog recorded. Read-only. */
export async function readRequestUsage(engine: Engine, paths: LakePaths, account: string): Promise<Map<string, number>> {
  const usage = new Map<string, number>();
  if (!existsSync(paths.catalog)) return usage;
  const conn = engine.conn;
  await retryOnLock(() => conn.run(`ATTACH ${literal(paths.catalog)} AS chainlake_usage (READ_ONLY)`), catalogWaitMs(60_000), 'reading request usage');
  try {
    const has = (
      await conn.runAndReadAll(`SELECT 1 FROM duckdb_tables() WHERE database_name = 'chainlake_usage' AND table_name = 'request_usage'`)
    ).getRowsJS();
    if (has.length === 0) return usage;
    const rows = (
      await conn.runAndReadAll(
        `SELECT strftime(day, '%Y-%m-%d'), sum(requests)::BIGINT FROM chainlake_usage.request_usage WHERE account = ${literal(account)} GROUP BY day`,
      )
    ).getRowsJS();
    for (const [day, n] of rows) usage.set(String(day), Number(n));
    return usage;
  } finally {
    await conn.run(`DETACH chainlake_usage`);
  }
}
