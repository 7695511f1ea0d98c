import { existsSync } from 'node:fs';
import { retryOnLock } from './catalog.js';
import { catalogWaitMs } from './catalog-wait.js';
import type { Engine } from './engine.js';
import type { LakePaths } from './paths.js';
import { literal } from './sql.js';
import { DuckDbCatalog } from '../ducklake/catalog-db.js';
import { readLastRunPace, readLedgerState, readRequestUsage as readUsage, type PlanningState, type RunPace } from './ledger/planning.js';
import type { Ledger } from './ledger/windows.js';

export { watermarkKey, windowKey, type PlanningState, type ResumePoint } from './ledger/planning.js';

/**
 * Runs `read` on the lake's ledger (`catalog.duckdb`, attached read-only) when the catalog holds every table of
 * `tables`; else `absent` (an absent catalog is an empty lake).
 */
async function withLedger<T>(
  engine: Engine,
  paths: LakePaths,
  tables: readonly string[],
  what: string,
  absent: () => T,
  read: (ledger: Ledger, lake: string | undefined) => Promise<T>,
): Promise<T> {
  if (!existsSync(paths.catalog)) return absent();
  const conn = engine.conn;
  // A user's session or a commit may hold the file for a moment: wait, as every catalog reader does.
  await retryOnLock(() => conn.run(`ATTACH ${literal(paths.catalog)} AS ${LEDGER_ALIAS} (READ_ONLY)`), catalogWaitMs(60_000), what);
  try {
    const present = new Set(
      (await conn.runAndReadAll(`SELECT table_name FROM duckdb_tables() WHERE database_name = '${LEDGER_ALIAS}'`)).getRowsJS().map((r) => String(r[0])),
    );
    if (!tables.every((t) => present.has(t))) return absent();
    // The lake's DuckLake tables, beside the ledger in the same file (none before the first commit made it a DuckLake).
    const lake = present.has('ducklake_table') && present.has('ducklake_schema') ? LEDGER_ALIAS : undefined;
    const runColumns = (
      await conn.runAndReadAll(`SELECT column_name FROM duckdb_columns() WHERE database_name = '${LEDGER_ALIAS}' AND table_name = 'runs'`)
    ).getRowsJS();
    if (!present.has('runs') || runColumns.some((r) => r[0] === 'head')) return await read({ db: new DuckDbCatalog(conn), schema: LEDGER_ALIAS }, lake);
    // A catalog of format 3 (read-only here: the next write migrates it) has no runs.head nor runs.network: the
    // ledger's statements read it through views that add them, empty (its runs name both in their report).
    await conn.run(`CREATE SCHEMA ${COMPAT_SCHEMA}`);
    try {
      for (const t of ['runs', 'windows', 'watermarks', 'request_usage'].filter((name) => present.has(name))) {
        const more = t === 'runs' ? ', CAST(NULL AS BIGINT) AS head, CAST(NULL AS VARCHAR) AS network' : '';
        await conn.run(`CREATE VIEW ${COMPAT_SCHEMA}."${t}" AS SELECT *${more} FROM ${LEDGER_ALIAS}."${t}"`);
      }
      return await read({ db: new DuckDbCatalog(conn), schema: COMPAT_SCHEMA }, lake);
    } finally {
      await conn.run(`DROP SCHEMA ${COMPAT_SCHEMA} CASCADE`);
    }
  } finally {
    await conn.run(`DETACH ${LEDGER_ALIAS}`);
  }
}

const LEDGER_ALIAS = 'chainlake_state';
/** Where a catalog of format 3 is read through views (in the engine's own database, dropped after). */
const COMPAT_SCHEMA = 'chainlake_state_v3';

/**
 * Reads the watermarks of a network and, when the latest run of `job` did not complete (it failed, or was
 * killed and still says `running`), the point to resume from (ledger/planning.ts, the distributed ledger's
 * reader too), less the claims on tables the lake no longer knows. Read-only; an absent catalog is an empty lake.
 */
export async function readPlanningState(engine: Engine, paths: LakePaths, job: string, network: string): Promise<PlanningState> {
  return withLedger(
    engine,
    paths,
    ['watermarks', 'runs', 'windows'],
    'reading watermarks',
    () => ({ watermarks: new Map() }),
    (ledger, lake) => readLedgerState(ledger, job, network, { resume: true, ...(lake ? { lake } : {}) }),
  );
}

/** Requests sent per UTC day (YYYY-MM-DD) for `account`, by every run the catalog recorded. Read-only. */
export async function readRequestUsage(engine: Engine, paths: LakePaths, account: string): Promise<Map<string, number>> {
  return withLedger(
    engine,
    paths,
    ['request_usage'],
    'reading request usage',
    () => new Map<string, number>(),
    (ledger) => readUsage(ledger, account),
  );
}

/** The pace of the job's last complete run on this lake (ledger/planning.ts), or undefined. Read-only. */
export async function readLastRun(engine: Engine, paths: LakePaths, job: string, network: string): Promise<RunPace | undefined> {
  return withLedger(
    engine,
    paths,
    ['runs'],
    'reading the last run',
    () => undefined,
    (ledger) => readLastRunPace(ledger, job, network),
  );
}
