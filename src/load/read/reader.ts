import { existsSync } from 'node:fs';
import type { DuckDBConnection } from '@duckdb/node-api';
import { DuckDBInstance } from '../../ducklake/node-api.js';
import { DATASETS } from '../../datasets/registry.js';
import { lakeViewBodies, retryOnLock, VIEWS_SNAPSHOT, type DeclaredTable } from '../catalog.js';
import { DuckDbCatalog, DuckLakeError } from '../../ducklake/catalog-db.js';
import { resolveSnapshot, type AsOf } from '../../ducklake/reader.js';
import type { LakePaths } from '../paths.js';
import { hasPendingCommit, repairIfFree } from '../write/recovery.js';
import { ChainlakeError, chainlakeCodeOf } from '../../errors.js';
import { CatalogDamagedError, isCatalogDamage } from '../catalog-damage.js';
import type { LakeAccessError } from '../lock.js';
import { datasetShape, REJECTS_SHAPE } from '../schema.js';
import { ident, literal } from '../sql.js';

export interface LakeReader {
  conn: DuckDBConnection;
  /**
   * Where the catalog says the lake was, when it has moved and this reader could not update the catalog (a
   * read-only copy): its views then point there, so this reader shadows them with temporary views of the lake's
   * current place. Running any chainlake command with write access to the lake (e.g. `status`) updates it.
   */
  movedFrom?: string;
  close(): void;
}

export class NoLakeError extends ChainlakeError {
  constructor(readonly paths: LakePaths) {
    super(`no lake at ${paths.root}: ${paths.catalog} does not exist (run a job first)`, {
      code: 'CHAINLAKE_NO_LAKE',
      hint: existsSync(paths.stagingRoot)
        ? 'the lake folder is there but its catalog is gone: `chainlake catalog rebuild` recreates it from the files'
        : 'check --lake (or $CHAINLAKE_LAKE): it names the folder a run wrote',
    });
  }
}

/** A reader that repairs the lake holds its lock under this name (runs wait for it: pipeline/run.ts). */
export const READER_HOLDER_PREFIX = 'reader-';

/** How long a reader waits for a commit in progress to let go of the catalog (it holds it for milliseconds). */
const READER_WAIT_MS = 60_000;

async function openReadOnly(paths: LakePaths, waitMs: number): Promise<{ instance: DuckDBInstance; conn: DuckDBConnection }> {
  const instance = await retryOnLock(
    () => DuckDBInstance.create(paths.catalog, { access_mode: 'READ_ONLY', autoinstall_known_extensions: 'false', autoload_known_extensions: 'true' }),
    waitMs,
    'query',
  );
  try {
    const conn = await instance.connect();
    await conn.run("SET TimeZone = 'UTC'");
    return { instance, conn };
  } catch (e) {
    instance.closeSync();
    throw e;
  }
}

async function recordedRoot(conn: DuckDBConnection): Promise<string | undefined> {
  try {
    const rows = (await conn.runAndReadAll(`SELECT value FROM lake_meta WHERE key = 'root'`)).getRowsJS();
    return rows[0]?.[0] as string | undefined;
  } catch {
    return undefined; // a catalog older than lake_meta
  }
}

/**
 * Opens a lake's catalog read-only, as a snapshot: while this reader is open, no commit can swap files (a
 * writer needs the catalog exclusively), and a commit in progress makes it wait instead of failing. Before
 * reading, it finishes a killed writer's pending commit and rebuilds the views of a moved lake, when no
 * live run holds the lake — so what it reads is always a committed state at the lake's current place.
 * With `asOf`, its tables are those of an earlier DuckLake snapshot (by id, or the newest at a time).
 */
export async function openLakeReader(paths: LakePaths, opts: { waitMs?: number; by?: string; asOf?: AsOf } = {}): Promise<LakeReader> {
  try {
    return await openCatalogReader(paths, opts);
  } catch (e) {
    // DuckDB's refusal of a damaged file carries no code: named here, where the catalog is opened, so that every
    // reader (a library's openLake too) gets the error with the one fix, `catalog rebuild`.
    if (chainlakeCodeOf(e) === undefined && isCatalogDamage(e)) throw new CatalogDamagedError(e, paths.root);
    throw e;
  }
}

async function openCatalogReader(paths: LakePaths, opts: { waitMs?: number; by?: string; asOf?: AsOf }): Promise<LakeReader> {
  const waitMs = opts.waitMs ?? READER_WAIT_MS;
  const by = opts.by ?? `${READER_HOLDER_PREFIX}${process.pid}`;
  // First: a lake's first run killed after deciding its commit has files to land but no catalog yet.
  if (await hasPendingCommit(paths)) await tryRepair(paths, by);
  if (!existsSync(paths.catalog)) throw new NoLakeError(paths);
  let { instance, conn } = await openReadOnly(paths, waitMs);
  let movedFrom: string | undefined;
  if ((await recordedRoot(conn)) !== paths.root) {
    conn.closeSync();
    instance.closeSync();
    await tryRepair(paths, by);
    ({ instance, conn } = await openReadOnly(paths, waitMs));
    const root = await recordedRoot(conn);
    if (root !== undefined && root !== paths.root) {
      movedFrom = root;
      try {
        await shadowViews(conn, paths);
      } catch (e) {
        conn.closeSync();
        instance.closeSync();
        throw e;
      }
    }
  }
  if (opts.asOf === undefined && movedFrom === undefined) {
    // Another DuckLake writer (a user's DuckDB with the ducklake extension) commits without refreshing the views:
    // they would name files its merges and cleanups replaced or deleted. This reader then reads the newest snapshot.
    try {
      if (await viewsBehind(conn)) await shadowViews(conn, paths);
    } catch (e) {
      conn.closeSync();
      instance.closeSync();
      throw e;
    }
  }
  if (opts.asOf !== undefined) {
    try {
      const snapshot = await resolveSnapshot(new DuckDbCatalog(conn), opts.asOf);
      await shadowViews(conn, paths, snapshot.snapshotId);
    } catch (e) {
      conn.closeSync();
      instance.closeSync();
      throw e instanceof DuckLakeError
        ? new ChainlakeError(e.message, { code: 'CHAINLAKE_USAGE', hint: 'list the snapshots: SELECT * FROM ducklake_snapshot' })
        : e;
    }
  }
  return {
    conn,
    movedFrom,
    close() {
      conn.closeSync();
      instance.closeSync();
    },
  };
}

/** Whether the catalog's views were built at an older snapshot than the DuckLake's newest (or at an unknown one). */
async function viewsBehind(conn: DuckDBConnection): Promise<boolean> {
  const tables = (
    await conn.runAndReadAll(
      `SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND table_name IN ('lake_meta', 'ducklake_snapshot')`,
    )
  ).getRowsJS();
  if (tables.length < 2) return false; // no DuckLake yet (or a catalog of the layout before): nothing to compare
  const rows = (
    await conn.runAndReadAll(
      `SELECT (SELECT value FROM lake_meta WHERE key = ${literal(VIEWS_SNAPSHOT)}) AS views, (SELECT CAST(max(snapshot_id) AS VARCHAR) FROM ducklake_snapshot) AS newest`,
    )
  ).getRowObjectsJS();
  return rows[0]?.views !== rows[0]?.newest;
}

/**
 * Temporary views (they shadow the catalog's, for this connection only) of every table at the lake's current
 * place, at the DuckLake snapshot `snapshot` (the newest when not given).
 */
async function shadowViews(conn: DuckDBConnection, paths: LakePaths, snapshot?: number): Promise<void> {
  // A catalog this version has not set up yet (a read-only mount) still keeps its declarations in lake_meta.
  const ledger = (
    await conn.runAndReadAll(`SELECT 1 FROM duckdb_tables() WHERE database_name = current_database() AND table_name = 'declared_tables'`)
  ).getRowsJS();
  const sql = `SELECT value FROM lake_meta WHERE key LIKE 'table:%'${ledger.length ? ' UNION ALL SELECT CAST(declaration AS VARCHAR) FROM declared_tables' : ''}`;
  const declared = ((await conn.runAndReadAll(sql)).getRowsJS() as [string][]).map(([v]) => (JSON.parse(v) as DeclaredTable).shape);
  const shapes = [...Object.values(DATASETS).map(datasetShape), ...declared, REJECTS_SHAPE];
  const bodies = await lakeViewBodies(new DuckDbCatalog(conn), `${paths.root}/`, shapes, snapshot);
  await conn.run(shapes.map((shape) => `CREATE OR REPLACE TEMP VIEW ${ident(shape.name)} AS ${bodies.get(shape.name)!}`).join(';\n'));
}

/** A reader may not be allowed to write the lake (a shared, read-only mount): then it reads it as it is. */
async function tryRepair(paths: LakePaths, by: string): Promise<void> {
  try {
    await repairIfFree(paths, by);
  } catch (e) {
    const code = chainlakeCodeOf(e) === 'CHAINLAKE_LAKE_ACCESS' ? (e as LakeAccessError).errno : (e as NodeJS.ErrnoException).code;
    if (code !== 'EACCES' && code !== 'EROFS' && code !== 'EPERM') throw e;
  }
}

/** `--as-of`: a snapshot id (digits) or a time (ISO 8601). */
export function parseAsOf(text: string | undefined): AsOf {
  if (text === undefined) return undefined;
  if (/^\d+$/.test(text)) return { snapshot: Number(text) };
  const time = new Date(text);
  if (Number.isNaN(time.getTime())) {
    throw new ChainlakeError(`--as-of ${text} is neither a snapshot id nor a time`, {
      code: 'CHAINLAKE_USAGE',
      hint: 'give a snapshot id (--as-of 12) or an ISO time (--as-of 2026-11-24T06:00:00Z)',
    });
  }
  return { time };
}
