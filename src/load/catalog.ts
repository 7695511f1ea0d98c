import { createHash } from 'node:crypto';
import { CATALOG_WAIT_NOTICE_MS, CatalogLockedError, catalogWaitListener, catalogWaitMs } from './catalog-wait.js';
export { CatalogLockedError } from './catalog-wait.js';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { DatasetDef } from '../datasets/dataset.js';
import { DATASETS } from '../datasets/registry.js';
import type { CommittedFile } from './write/commit.js';
import { DuckDbCatalog, type CatalogDb } from '../ducklake/catalog-db.js';
import { ensureVerificationsTable, verificationsDdl } from './ledger/verifications.js';
import { initialiseCatalog, uuidv7 } from '../ducklake/ddl.js';
import { currentSnapshot, listAllColumns, listDataFiles, listInlinedData, listTables, scanSql } from '../ducklake/reader.js';
import { commitTables, expireSnapshots, filesToDelete, forgetDeletedFiles, type StagedFile } from '../ducklake/writer.js';
import { link, readdir, readFile, rm, rmdir } from 'node:fs/promises';
import { fsyncDir, writeSynced } from './write/durable.js';
import { scratchPath } from './scratch.js';
import { ChainlakeError } from '../errors.js';
import { ensureTables, JoinedDuckDbCatalog, readLakeState, type LakeState } from './write/lake-state.js';
import type { DuckDBConnection } from '@duckdb/node-api';
import { DuckDBInstance } from '../ducklake/node-api.js';
import type { LakePaths } from './paths.js';
import { REJECTS_SHAPE, datasetShape, emptyTypedSelect, type DeclaredTable, type LakeColumn, type TableShape } from './schema.js';
import { ident, literal } from './sql.js';
import { LEDGER_TABLES, ledgerComments, ledgerDdl, migrateLedger } from './ledger/schema.js';
import { readDeclaredTables, declareTables, LEGACY_DECLARATIONS } from './ledger/declared-tables.js';
import { recordEnded, type EndedWindow } from './ledger/windows.js';
import { recordRun as recordRunRow, type RunRecord } from './ledger/runs.js';
import type { RequestRecord } from '../extract/request-log.js';
import { REQUESTS_COLUMNS, REQUESTS_TABLE, requestsLedgerDdl } from './ledger/requests.js';

/** The catalog's own DuckDB: small (catalog rows, view definitions), so that it never grows a run's memory. */
const CATALOG_MEMORY_LIMIT = '64MB';

export type { DeclaredTable } from './schema.js';

/** What a run sent per UTC day for one account (see RequestQuota), as its run record carries it. */
export interface RequestUsage {
  account: string;
  days: Record<string, number>;
}

/**
 * Bumped when the catalog's tables change shape; older catalogs are migrated in place. Format 3: the lake is a
 * DuckLake (the `files` table became a view of the DuckLake's current files). Format 4: the run ledger is the one
 * both modes share (load/ledger/schema.ts): `runs` and `windows` gained the distributed mode's columns.
 */
export const CATALOG_FORMAT = 4;

const LAKE_META = `CREATE TABLE IF NOT EXISTS lake_meta (key VARCHAR PRIMARY KEY, value VARCHAR)`;
const LAKE_META_DOC = 'Facts about this lake: its absolute root (views are rebuilt when the lake moves) and the catalog format.';
const REQUESTS_DOC =
  'One row per call a window made (lineage: `chainlake explain` follows a row to its window and these). Written with the window, in the same commit.';

/**
 * The catalog's tables, as a new catalog gets them (a damaged catalog's salvage creates them too: load/write/salvage.ts):
 * the run ledger (load/ledger/schema.ts; its window_id keys lineage's calls) and lineage's `requests`
 * (load/ledger/requests.ts).
 */
export const TABLES = [LAKE_META, ...ledgerDdl('duckdb'), ...requestsLedgerDdl()];

/**
 * The declaration a catalog's setup (Catalog.hold) brings its tables to, as a digest recorded in lake_meta: a
 * catalog that records this one was set up by this very declaration, and opening it skips the setup (a read of
 * information_schema, a migration check and a dozen CREATE IF NOT EXISTS), which every commit, recovery and run
 * start otherwise paid again (docs/performance.md, "The single-machine lake as a DuckLake"). Any change to a table's
 * declaration changes it, and the next open sets the catalog up again.
 */
const LEDGER_SIGNATURE = createHash('sha256')
  .update(JSON.stringify([TABLES, verificationsDdl(''), LEDGER_TABLES]))
  .digest('hex');
const LEDGER_SIGNATURE_KEY = 'ledger_schema';

/** A window as a run records it: the ledger's ended window (ledger/windows.ts), with its calls. */
export interface WindowRecord extends Omit<EndedWindow, 'windowId'> {
  /** The window's stable id (`dataset/network/scope/range`); absent in journals written before lineage. */
  windowId?: string;
  /** The window's calls (its `requests` rows), recorded with it. */
  calls?: RequestRecord[];
}

/** A run's row in `runs`, as the one ledger writer takes it (ledger/runs.ts). */
export type RunRow = RunRecord;

const str = (s: string | null | undefined): string => (s === null || s === undefined ? 'NULL' : literal(s));

/** DuckDB's refusal to open a database file another process holds (a writer, or readers against a writer), or another hold of this one. */
export function isLockConflict(e: unknown): boolean {
  // The last: a hold of this process attached the file already (Catalog.hold), waited out like another process's.
  return /Could not set lock on file|Conflicting lock is held|Unique file handle conflict/i.test((e as Error)?.message ?? '');
}

/** The catalog file and its holder, as DuckDB's lock error names them. */
function lockHolder(e: unknown): { file: string | undefined; holder: string | undefined } {
  const m = (e as Error)?.message ?? '';
  return { file: /lock on file "([^"]+)"/.exec(m)?.[1], holder: /held in (.+? \(PID \d+\))/.exec(m)?.[1] };
}

/** Retries `fn` while the catalog file is locked by another process, with capped, jittered backoff. */
export async function retryOnLock<T>(fn: () => Promise<T>, waitMs: number, what: string): Promise<T> {
  const started = Date.now();
  const deadline = started + waitMs;
  let delay = 5;
  let told = false;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (!isLockConflict(e)) throw e;
      if (!told && Date.now() - started >= Math.min(CATALOG_WAIT_NOTICE_MS, waitMs / 2)) {
        told = true;
        catalogWaitListener()?.({ what, ...lockHolder(e), waitMs: Math.max(0, deadline - Date.now()) });
      }
      if (Date.now() >= deadline)
        // What a person fixes (another session holds catalog.duckdb), but not a usage error: the next command,
        // once the file is free, finishes what was decided (exit 1, as before it had a code).
        throw new CatalogLockedError(`${what}: the catalog stayed locked by another process for ${waitMs} ms (${(e as Error).message.split('\n')[0]})`, e);
      await new Promise((r) => setTimeout(r, delay * (0.5 + Math.random())));
      delay = Math.min(delay * 2, 200);
    }
  }
}

/**
 * Removes what a killed process's DuckDB left in the catalog's temporary directory (`catalog.duckdb.tmp`, DuckDB's
 * default beside the database), which DuckDB does not remove, and a new catalog's copy a kill left unlinked
 * (placeNewCatalog). Called right after the catalog is opened for writing:
 * DuckDB's lock on the file is then exclusive, so no other process has it open (a reader's read-only DuckDB spills
 * there too), and this one has not spilled yet.
 */
async function removeStaleTemporaryFiles(catalog: string): Promise<void> {
  const base = path.basename(catalog);
  for (const f of await readdir(path.dirname(catalog)).catch(() => [] as string[]))
    if (f.startsWith(`${base}.`) && f.endsWith(NEW_CATALOG_SUFFIX)) await rm(path.join(path.dirname(catalog), f), { force: true });
  const dir = `${catalog}.tmp`;
  const stale = (await readdir(dir).catch(() => [] as string[])).filter((f) => f.startsWith('duckdb_temp_'));
  for (const f of stale) await rm(path.join(dir, f), { force: true });
  if (stale.length) await rmdir(dir).catch(() => undefined);
}

/**
 * The in-memory DuckDB every catalog of this process is attached to for the time of a hold (Catalog.hold): a
 * DuckDB of its own per hold costs more to create and close than an ATTACH and DETACH (DuckDB loads its built-in
 * extensions into every new database instance), and a run holds the catalog three to four times (docs/performance.md,
 * "A run's fixed cost").
 * What spills goes to a folder of this process under the system temp directory, named as scratch folders are
 * (load/scratch.ts scratchPath) so that the folder of a killed one is swept; it is made only when something spills.
 */
let host: Promise<DuckDBInstance> | undefined;
/** Holds so far: each attaches its catalog under a name of its own (holds of several lakes may overlap). */
let attached = 0;
/** Holds going on now; with none for HOST_IDLE_MS, the host is closed (closeIdleHost). */
let active = 0;
let idle: NodeJS.Timeout | undefined;
/**
 * How long the host stays open without a hold. The holds of a run's start and of a small commit come closer than
 * this; a run fetching or merging for longer gives the host's memory back meanwhile: kept open, it raised the memory
 * scenario's peaks (docs/performance.md, "A run's fixed cost").
 */
const HOST_IDLE_MS = 1_000;

/** Closes the host once no hold has used it for HOST_IDLE_MS (the timer does not keep the process alive). */
function releaseHost(): void {
  if (--active > 0) return;
  clearTimeout(idle);
  idle = setTimeout(() => {
    if (active > 0 || !host) return;
    const closing = host;
    host = undefined;
    void closing.then((i) => i.closeSync()).catch(() => undefined);
  }, HOST_IDLE_MS);
  idle.unref();
}

function catalogHost(): Promise<DuckDBInstance> {
  host ??= DuckDBInstance.create(':memory:', {
    threads: '1',
    memory_limit: CATALOG_MEMORY_LIMIT,
    // A scratch folder's name (swept once this process is dead); DuckDB makes it only when something spills.
    temp_directory: scratchPath('catalog'),
    autoinstall_known_extensions: 'false',
    autoload_known_extensions: 'true',
  }).catch((e: unknown) => {
    host = undefined;
    throw e;
  });
  return host;
}

/** Detaches a hold's catalog on a connection of its own (the hold's is closed, with any transaction it left). */
async function detach(alias: string): Promise<void> {
  const conn = await (await catalogHost()).connect();
  try {
    await conn.run(`DETACH ${alias}`);
  } finally {
    conn.closeSync();
  }
}

/** lake_meta's mark of a catalog copied from another new lake's and not yet given its own lake's values (Catalog.adopt). */
const ADOPT_KEY = 'adopt';

/**
 * The file of the first new catalog this process set up (Catalog.image), which later new catalogs start as a copy
 * of: a new catalog's setup (the ledger's and the DuckLake's tables, the views and their comments: hundreds of
 * statements and a checkpoint) is then paid once per process instead of once per lake (docs/performance.md, "A run's
 * fixed cost").
 * Made by this very process, so by the declarations a setup would apply now.
 */
let newCatalogImage: Buffer | undefined;

/**
 * A new lake's catalog as a copy of `image`, whole or not at all: written and fsynced beside it, then linked into
 * place (never over a catalog another process just created: then that one is used) and the folder fsynced.
 * A copy left by a kill before the link is removed by the next open (removeStaleTemporaryFiles).
 */
async function placeNewCatalog(catalog: string, image: Buffer): Promise<void> {
  const copy = `${catalog}.${process.pid}${NEW_CATALOG_SUFFIX}`;
  await writeSynced(copy, image);
  try {
    await link(copy, catalog);
    await fsyncDir(path.dirname(catalog));
  } catch (e) {
    // Another process created the catalog first (it is then used as it is), or the filesystem has no hard links
    // (DuckDB then creates the catalog and it is set up by statements, as the first one was).
    // ENOENT: the copy was removed by a process that opened the catalog it created meanwhile.
    if (!['EEXIST', 'ENOENT', 'EPERM', 'ENOTSUP'].includes((e as NodeJS.ErrnoException).code ?? '')) throw e;
  } finally {
    await rm(copy, { force: true });
  }
}

/** The ending of a new catalog's copy before it is linked into place (placeNewCatalog). */
const NEW_CATALOG_SUFFIX = '.new';

/**
 * `<lake>/catalog.duckdb`: a view per dataset (with column comments) and the run bookkeeping. A writer
 * attaches it only for the moment of a commit, holding DuckDB's exclusive file lock: catalog readers (who
 * hold a shared lock while they query) are never mid-query while the commit swaps files, so they see the
 * lake before the commit or after it, never in between.
 */
export class Catalog {
  private constructor(
    private readonly conn: DuckDBConnection,
    readonly paths: LakePaths,
  ) {}

  /** Attaches the catalog, runs `fn` inside one transaction, detaches. */
  static write<T>(paths: LakePaths, fn: (c: Catalog) => Promise<T>): Promise<T> {
    return Catalog.hold(paths, (c) => c.transaction(() => fn(c)));
  }

  /**
   * Opens the catalog exclusively (waiting for readers), runs `fn`, detaches it: attached to the process's catalog
   * DuckDB (catalogHost) on a connection of its own, which is closed with it (its temporary tables go too). Not on
   * the run's engine: the DuckLake's tables and statistics a commit reads and writes would stay in the engine's pool
   * and allocator beside the merges, raising the memory scenario's peak when they did; detached after
   * each use, the catalog's pages leave the host's pool.
   */
  static async hold<T>(paths: LakePaths, fn: (c: Catalog) => Promise<T>, opts: { waitMs?: number } = {}): Promise<T> {
    const fresh = !existsSync(paths.catalog);
    if (fresh && newCatalogImage) await placeNewCatalog(paths.catalog, newCatalogImage);
    active++;
    clearTimeout(idle);
    try {
      return await Catalog.attached(paths, fn, fresh, opts);
    } finally {
      releaseHost();
    }
  }

  /** Catalog.hold's work, on the host (catalogHost) that hold keeps open for it. */
  private static async attached<T>(paths: LakePaths, fn: (c: Catalog) => Promise<T>, fresh: boolean, opts: { waitMs?: number }): Promise<T> {
    const instance = await catalogHost();
    const alias = ident(`chainlake_catalog_${++attached}`);
    const conn = await instance.connect();
    try {
      await retryOnLock(() => conn.run(`ATTACH ${literal(paths.catalog)} AS ${alias}`), opts.waitMs ?? catalogWaitMs(300_000), 'commit');
    } catch (e) {
      conn.closeSync();
      throw e;
    }
    try {
      await removeStaleTemporaryFiles(paths.catalog);
      await conn.run(`USE ${alias}`);
      await conn.run("SET TimeZone = 'UTC'");
      const catalog = new Catalog(conn, paths);
      const setUp = await catalog.setUpState();
      if (!setUp.current) await catalog.setUp();
      if (await catalog.ensureDuckLake()) {
        // A new DuckLake gets its views (empty ones) and comments at once; a copy of it then starts the next new catalog.
        await catalog.transaction(() => catalog.refreshViews());
        if (fresh && !newCatalogImage) newCatalogImage = await catalog.image();
      } else if (setUp.adopt) await catalog.adopt();
      return await fn(catalog);
    } finally {
      // Detached once no transaction of this connection is open on it: DETACH checkpoints the file and releases
      // DuckDB's lock on it, as closing a DuckDB of its own did.
      conn.closeSync();
      await detach(alias);
    }
  }

  /**
   * The catalog's file as it is now, marked to be adopted (adopt), for a copy to start another new lake: taken
   * right after a new catalog's setup, so it holds what every new catalog holds and nothing of a run. The mark
   * stays in the copy only: this catalog's own values are its lake's already.
   */
  private async image(): Promise<Buffer> {
    await this.run(`INSERT OR REPLACE INTO lake_meta VALUES (${literal(ADOPT_KEY)}, 'true')`);
    await this.run('CHECKPOINT');
    const image = await readFile(this.paths.catalog);
    await this.run(`DELETE FROM lake_meta WHERE key = ${literal(ADOPT_KEY)}`);
    return image;
  }

  /**
   * A catalog that started as a copy of another new lake's (placeNewCatalog) gets the values that are its own
   * lake's, in one transaction with the removal of the mark (a kill before leaves the mark: the next open
   * adopts it): the DuckLake's data path, its schema's UUID, its first snapshot's time, its root.
   */
  private async adopt(): Promise<void> {
    await this.transaction(async () => {
      await this.lake.query(`UPDATE ducklake_schema SET schema_uuid = $1 WHERE schema_id = 0`, [uuidv7()]);
      await this.run(`UPDATE ducklake_snapshot SET snapshot_time = NOW() WHERE snapshot_id = 0`);
      await this.run(`UPDATE ducklake_metadata SET value = ${literal(this.dataPath)} WHERE key = 'data_path' AND scope IS NULL`);
      await this.run(`INSERT OR REPLACE INTO lake_meta VALUES ('root', ${literal(this.paths.root)})`);
      await this.run(`DELETE FROM lake_meta WHERE key = ${literal(ADOPT_KEY)}`);
    });
  }

  /**
   * Whether this catalog records the current ledger declaration (LEDGER_SIGNATURE: a fresh one has no lake_meta),
   * and whether it is a copy still to adopt (see adopt), in one read.
   */
  private async setUpState(): Promise<{ current: boolean; adopt: boolean }> {
    try {
      const rows = await this.rows(`SELECT key, value FROM lake_meta WHERE key IN (${literal(LEDGER_SIGNATURE_KEY)}, ${literal(ADOPT_KEY)})`);
      const meta = new Map(rows.map((r) => [String(r[0]), String(r[1])]));
      return { current: meta.get(LEDGER_SIGNATURE_KEY) === LEDGER_SIGNATURE, adopt: meta.has(ADOPT_KEY) };
    } catch {
      return { current: false, adopt: false };
    }
  }

  /**
   * The ledger created, or an older catalog's migrated (format 3 -> 4), under the file's exclusive lock, and the
   * declaration it now has recorded.
   */
  private async setUp(): Promise<void> {
    await this.run(LAKE_META);
    for (const t of requestsLedgerDdl()) await this.run(t);
    await ensureVerificationsTable(new DuckDbCatalog(this.conn), '');
    await this.transaction(async () => {
      await migrateLedger(this.lake);
      for (const sql of LEGACY_DECLARATIONS) await this.run(sql);
      await this.run(`INSERT OR REPLACE INTO lake_meta VALUES (${literal(LEDGER_SIGNATURE_KEY)}, ${literal(LEDGER_SIGNATURE)})`);
    });
  }

  /**
   * The views rebuilt at the lake's current place when the lake has moved since they were built (its recorded root
   * is another): true when it had moved (false for a catalog that recorded no root yet).
   */
  async relocate(): Promise<boolean> {
    const root = await this.meta('root');
    if (root === this.paths.root) return false;
    await this.transaction(() => this.refreshViews({ force: true }));
    return root !== undefined;
  }

  /** Runs `fn` in one catalog transaction: all of its records land, or none. */
  async transaction<T>(fn: () => Promise<T>): Promise<T> {
    await this.run('BEGIN TRANSACTION');
    try {
      const result = await fn();
      await this.run('COMMIT');
      return result;
    } catch (e) {
      // A COMMIT that failed (a full disk) ended the transaction itself, and ROLLBACK then fails with "no transaction
      // is active": the first error is the one that says what happened. The hold closes the connection either way.
      await this.run('ROLLBACK').catch(() => undefined);
      throw e;
    }
  }

  /** The DuckLake's tables in this catalog, joining the transaction open on it (see JoinedDuckDbCatalog). */
  get lake(): CatalogDb {
    return new JoinedDuckDbCatalog(this.conn);
  }

  /** The lake's directory as this process sees it, as a DuckLake data path. */
  get dataPath(): string {
    return `${this.paths.root}/`;
  }

  /**
   * A new catalog becomes a DuckLake (its metadata tables and first snapshot) in one transaction (then: true). A catalog of
   * the layout before (one data.parquet per partition, a `files` table) is refused with the way to convert it.
   */
  async ensureDuckLake(): Promise<boolean> {
    const tables = new Set((await this.rows(`SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()`)).map((r) => String(r[0])));
    if (tables.has('files')) {
      throw new ChainlakeError(`the lake at ${this.paths.root} was written by an earlier chainlake (one data.parquet per partition, not a DuckLake)`, {
        hint: '`chainlake catalog rebuild` converts it: every partition is rewritten once as a DuckLake data file, runs, windows and watermarks are kept',
      });
    }
    if (tables.has('ducklake_metadata')) return false;
    await this.transaction(() => initialiseCatalog(this.lake, { dataPath: this.dataPath }));
    return true;
  }

  /**
   * The lake's tables for `shapes` (created when missing) and the files of each partition now. Inside a transaction.
   * With `workDir`, the partitions another DuckLake writer changed in the catalog (inlined rows, deletes) are written
   * out there for merging (see readLakeState). `declared`: tables read but not created, checked for another writer's
   * changes to their declared columns as `shapes` are. `decoding`: a decoding of every log (dropped-tables.ts).
   */
  lakeState(shapes: readonly TableShape[] = [], workDir?: string, declared?: readonly TableShape[], opts: { decoding?: boolean } = {}): Promise<LakeState> {
    return readLakeState(this.lake, this.dataPath, shapes, { workDir, ...(declared ? { declared } : {}), ...opts });
  }

  /** Creates the tables of `shapes` the lake lacks (see lakeState), without reading their files. */
  async ensureTables(shapes: readonly TableShape[]): Promise<void> {
    await ensureTables(this.lake, shapes);
  }

  /**
   * The commit's data files as ONE DuckLake snapshot, each file replacing its partition's current files: inside the
   * catalog transaction that records the commit, so they land with it or not at all.
   */
  async commitLake(
    commitId: string,
    files: readonly { table: string; file: StagedFile }[],
    cleared: readonly { table: string; partitionValues: string[] }[] = [],
  ): Promise<number | undefined> {
    const byTable = new Map<string, { files: StagedFile[]; partitions: Map<string, readonly string[]> }>();
    const of = (table: string) => byTable.get(table) ?? byTable.set(table, { files: [], partitions: new Map() }).get(table)!;
    for (const f of files) {
      of(f.table).files.push(f.file);
      of(f.table).partitions.set(JSON.stringify(f.file.partitionValues), f.file.partitionValues!);
    }
    // A partition every row of which went: its files end, and none replaces them.
    for (const c of cleared) of(c.table).partitions.set(JSON.stringify(c.partitionValues), c.partitionValues);
    const tables = [...byTable].map(([tableName, t]) => ({ tableName, files: t.files, replacePartitions: [...t.partitions.values()] }));
    if (tables.length === 0) return undefined;
    return (await commitTables(this.lake, { tables, author: 'chainlake', message: commitId })).snapshotId;
  }

  /**
   * Expires the snapshots of a run's earlier commits (its batches before `snapshot`, which its commit just made):
   * time travel keeps one snapshot per run, and the partitions a long run rewrote at every batch leave one
   * version each, not one per batch. The files only they needed are scheduled for deletion (deleteScheduled).
   */
  async expireInterim(runId: string, snapshot: number): Promise<void> {
    const ids = (
      await this.lake.query(`SELECT snapshot_id FROM ducklake_snapshot_changes WHERE starts_with(commit_message, $1) AND snapshot_id < $2`, [
        `${runId}/`,
        snapshot,
      ])
    ).map((r) => Number(r.snapshot_id));
    if (ids.length) await expireSnapshots(this.lake, { ids });
  }

  /** Deletes the files scheduled for deletion, then forgets them (a kill in between leaves them scheduled: deleting a missing file is done). */
  async deleteScheduled(): Promise<number> {
    const scheduled = await filesToDelete(this.lake, { dataPath: this.dataPath });
    if (scheduled.length === 0) return 0;
    for (const f of scheduled) await rm(f.path, { force: true });
    await this.transaction(() => forgetDeletedFiles(this.lake, scheduled));
    return scheduled.length;
  }

  private run(sql: string): Promise<unknown> {
    return this.conn.run(sql);
  }

  private async rows(sql: string): Promise<unknown[][]> {
    return (await this.conn.runAndReadAll(sql)).getRowsJS() as unknown[][];
  }

  async meta(key: string): Promise<string | undefined> {
    const r = await this.rows(`SELECT value FROM lake_meta WHERE key = ${literal(key)}`);
    return r[0]?.[0] as string | undefined;
  }

  /** True once a commit is recorded: replaying its journal must then not record it twice. */
  async commitApplied(commitId: string): Promise<boolean> {
    return (await this.rows(`SELECT 1 FROM commits WHERE commit_id = ${literal(commitId)}`)).length > 0;
  }

  async recordCommit(commitId: string, runId: string, files: readonly CommittedFile[], recoveredBy: string | undefined): Promise<void> {
    const rows = files.reduce((a, f) => a + f.rows, 0);
    const bytes = files.reduce((a, f) => a + f.bytes, 0);
    await this.run(
      `INSERT INTO commits (commit_id, run_id, files, rows, bytes, committed_at, recovered_by) VALUES (${literal(commitId)}, ${literal(runId)}, ${files.length}, ${rows}, ${bytes}, now(), ${str(recoveredBy)})`,
    );
  }

  async recordRun(runId: string, job: string, startedAt: string, finishedAt: string | null, status: string, report: unknown): Promise<void> {
    await recordRunRow({ db: this.lake }, { runId, job, startedAt, finishedAt, status, report });
    // A run under a daily quota carries its usage in its record: the ledger moves with each commit, atomically.
    const usage = (report as { requestUsage?: RequestUsage } | null)?.requestUsage;
    for (const [day, n] of Object.entries(usage?.days ?? {})) {
      if (!/^\d{4}-\d{2}-\d{2}$/.test(day) || !Number.isSafeInteger(n)) continue;
      await this.run(
        `INSERT OR REPLACE INTO request_usage (day, account, run_id, requests) VALUES (${literal(day)}::DATE, ${literal(usage!.account)}, ${literal(runId)}, ${n})`,
      );
    }
  }

  /**
   * A dead run's request reservations (load/quota-ledger.ts) recorded as spent: each day's usage becomes the
   * larger of what its commits recorded and what it had reserved.
   */
  async recordReservedUsage(runId: string, usage: RequestUsage): Promise<void> {
    for (const [day, n] of Object.entries(usage.days)) {
      if (!/^\d{4}-\d{2}-\d{2}$/.test(day) || !Number.isSafeInteger(n)) continue;
      const [row] = await this.rows(
        `SELECT requests FROM request_usage WHERE day = ${literal(day)}::DATE AND account = ${literal(usage.account)} AND run_id = ${literal(runId)}`,
      );
      const recorded = row ? Number(row[0]) : 0;
      if (n > recorded)
        await this.run(
          `INSERT OR REPLACE INTO request_usage (day, account, run_id, requests) VALUES (${literal(day)}::DATE, ${literal(usage.account)}, ${literal(runId)}, ${n})`,
        );
    }
  }

  /** A run found dead by a later command: its row (if it wrote one) keeps its report, so a resume still knows its head. */
  async markAbandoned(runId: string, job: string, startedAt: string): Promise<void> {
    const existing = await this.rows(`SELECT status FROM runs WHERE run_id = ${literal(runId)}`);
    if (existing.length === 0) {
      await this.recordRun(runId, job, startedAt, null, 'abandoned', { reason: 'killed before its first commit' });
    } else if (existing[0]![0] === 'running') {
      await this.run(`UPDATE runs SET status = 'abandoned' WHERE run_id = ${literal(runId)}`);
    }
  }

  /** A run's ended windows (committed, provisional or failed), through the one window state machine. */
  async recordWindows(windows: readonly WindowRecord[]): Promise<void> {
    await recordEnded(
      { db: this.lake },
      windows.map((w) => ({ ...w, windowId: w.windowId ?? null })),
    );
  }

  /** Every file some snapshot lists or that waits for deletion: absolute paths (what is not here is not the lake's). */
  async listedFiles(): Promise<Set<string>> {
    const rows = await this.rows(
      `SELECT CASE WHEN d.path_is_relative THEN sc.path || t.path || d.path ELSE d.path END FROM ducklake_data_file d
         JOIN ducklake_table t USING (table_id) JOIN ducklake_schema sc ON sc.schema_id = t.schema_id
       UNION ALL SELECT path FROM ducklake_files_scheduled_for_deletion`,
    );
    return new Set(rows.map((r) => path.resolve(this.paths.root, String(r[0]))));
  }

  /** The tables beyond the registry that commits declared (decoded events). */
  async declaredTables(): Promise<DeclaredTable[]> {
    return readDeclaredTables({ db: this.lake });
  }

  /** Declares tables beyond the registry (decoded events): refreshViews then gives each a view. */
  async registerTables(tables: readonly DeclaredTable[]): Promise<void> {
    await declareTables({ db: this.lake }, tables);
  }

  /**
   * Whether a snapshot after `since` (up to `snapshot`) was made by another DuckLake writer than chainlake, or is
   * gone (expired by one): then views chainlake did not refresh since may name files that are no longer current.
   */
  private async othersSince(since: string | undefined, snapshot: number): Promise<boolean> {
    if (since === undefined || !/^\d+$/.test(since)) return true;
    const rows = await this.lake.query(
      `SELECT count(*) AS n FROM ducklake_snapshot_changes WHERE snapshot_id > $1 AND snapshot_id <= $2 AND author = 'chainlake'`,
      [Number(since), snapshot],
    );
    return Number(rows[0]?.n) !== snapshot - Number(since);
  }

  /**
   * (Re)creates a view per known dataset and `_rejects` over the files of the DuckLake's newest snapshot (an
   * empty view of the right columns and types for a table without files, so `SELECT … FROM <dataset>` works on
   * any lake), and the `files` view. Plain DuckDB reads them without the ducklake extension. Views name the
   * lake's absolute path (plain DuckDB resolves relative paths against its working directory, not the
   * catalog's folder), so the lake's root is recorded and a moved lake gets its views rebuilt. A view is only
   * rewritten when its definition changed: in a commit, the views of the tables it wrote.
   */
  async refreshViews(opts: { force?: boolean; tables?: ReadonlySet<string> } = {}): Promise<void> {
    const paths = this.paths;
    // Every commit comes here: what is already in place is skipped (one read of lake_meta instead of a
    // statement per comment, view and key; 180 ms of each commit on the replay bench before).
    // What must change is sent as one batch of statements (a fresh lake's views and comments are ~500).
    const meta = new Map((await this.rows('SELECT key, value FROM lake_meta')) as [string, string][]);
    const out: MetaStatements = { meta, force: opts.force === true, statements: [] };
    const comments = tableComments();
    if (changed(out, 'comments', createHash('sha256').update(JSON.stringify(comments)).digest('hex'))) out.statements.push(...comments);
    const shapes = viewedTables(await readDeclaredTables({ db: this.lake }));
    // A commit names the tables it wrote (`tables`): the others' views are as the last refresh left them, unless
    // a snapshot since that refresh is not chainlake's (another DuckLake writer's, or gone: expired by one).
    const snapshot = (await currentSnapshot(this.lake)).snapshotId;
    const tables = (await this.othersSince(meta.get(VIEWS_SNAPSHOT), snapshot)) ? undefined : opts.tables;
    const stale = shapes.filter(({ shape }) => opts.force || !tables || tables.has(shape.name) || !meta.has(`view:${shape.name}`));
    const bodies = await lakeViewBodies(
      this.lake,
      this.dataPath,
      stale.map((s) => s.shape),
    );
    for (const table of stale) tableView(out, table, bodies.get(table.shape.name)!);
    const files = filesView(shapes.map((s) => s.shape));
    if (changed(out, 'view:files', createHash('sha256').update(files).digest('hex'))) {
      out.statements.push(files, `COMMENT ON VIEW files IS ${literal(FILES_DOC)}`);
      for (const [c, d] of Object.entries(FILES_COLUMN_DOCS)) out.statements.push(`COMMENT ON COLUMN files.${ident(c)} IS ${literal(d)}`);
    }
    if (meta.get('root') !== paths.root) {
      // The DuckLake's own record of where its files are, for readers with the ducklake extension.
      out.statements.push(`UPDATE ducklake_metadata SET value = ${literal(this.dataPath)} WHERE key = 'data_path' AND scope IS NULL`);
    }
    setMeta(out, 'root', paths.root);
    setMeta(out, 'format', String(CATALOG_FORMAT));
    setMeta(out, VIEWS_SNAPSHOT, String(snapshot));
    if (out.statements.length) await this.run(out.statements.join(';\n'));
  }
}

/** The statements a refresh of the views sends, and lake_meta as it read it (what is in place is skipped). */
interface MetaStatements {
  meta: Map<string, string>;
  force: boolean;
  statements: string[];
}

/** Records `value` under `key` in lake_meta, unless it is there already. */
function setMeta(out: MetaStatements, key: string, value: string): void {
  if (out.meta.get(key) !== value) out.statements.push(`INSERT OR REPLACE INTO lake_meta VALUES (${literal(key)}, ${literal(value)})`);
}

/** Whether what `signature` stands for must be (re)written (a refresh by force rewrites all); records it if so. */
function changed(out: MetaStatements, key: string, signature: string): boolean {
  if (!out.force && out.meta.get(key) === signature) return false;
  setMeta(out, key, signature);
  return true;
}

/** Every table the views cover: the datasets, the tables commits declared (`declared`), `_rejects`. */
function viewedTables(declared: readonly DeclaredTable[]): DeclaredTable[] {
  return [
    ...Object.values(DATASETS).map((def) => ({ shape: datasetShape(def), doc: viewDoc(def), partitionDoc: partitionDoc(def) })),
    ...declared,
    {
      shape: REJECTS_SHAPE,
      doc: 'Rows that did not convert: dataset, window, field, raw value, reason and the whole API entry. Partitioned by network and the date of the run.',
      partitionDoc: 'UTC date of the run that saw the reject.',
    },
  ];
}

/** A table's view over `body` with its comments, when its definition changed. */
function tableView(out: MetaStatements, { shape, doc, partitionDoc: pdoc }: DeclaredTable, body: string): void {
  const columns = [...shape.columns, ...partitionColumnsOf(shape, pdoc)];
  const signature = createHash('sha256').update(JSON.stringify({ body, doc, columns })).digest('hex');
  if (!changed(out, `view:${shape.name}`, signature)) return;
  out.statements.push(`CREATE OR REPLACE VIEW ${ident(shape.name)} AS ${body}`, `COMMENT ON VIEW ${ident(shape.name)} IS ${literal(doc)}`);
  for (const c of columns) out.statements.push(`COMMENT ON COLUMN ${ident(shape.name)}.${ident(c.name)} IS ${literal(c.doc)}`);
}

/** lake_meta's key for the DuckLake snapshot the views were last refreshed at (readers compare it with the newest). */
export const VIEWS_SNAPSHOT = 'views_snapshot';

const FILES_DOC =
  "One row per Parquet file of the lake's newest snapshot (a view of the DuckLake's tables): rows, bytes and block range. Files of earlier snapshots stay on disk until `chainlake maintain` expires those snapshots.";
const FILES_COLUMN_DOCS: Record<string, string> = {
  path: 'Relative to the lake root.',
  min_block: 'Lowest block number in the file (NULL for datasets without blocks).',
  run_id:
    "The chainlake run whose commit wrote the file (NULL once that snapshot is expired); a distributed commit of several runs' windows names them all, comma-separated (each row's _run_id names its own).",
  snapshot_id: 'The DuckLake snapshot that added the file.',
};

/** The `files` view: the DuckLake's current data files, with the block range from their column statistics. */
/**
 * A snapshot's commit message, `<run>/<what>`: the `files` view reads the run that wrote a file from it (a local
 * commit's id has this form). A distributed commit of windows of several runs names them all, comma-separated.
 */
export function commitMessage(runIds: readonly string[], what: string): string {
  return `${[...new Set(runIds)].sort().join(',')}/${what}`;
}

export function filesView(shapes: readonly TableShape[]): string {
  const blocks = shapes.filter((s) => s.blockColumn).map((s) => `(${literal(s.name)}, ${literal(s.blockColumn!)})`);
  return `CREATE OR REPLACE VIEW files AS
    SELECT CASE WHEN d.path_is_relative THEN sc.path || t.path || d.path ELSE d.path END AS path,
           t.table_name AS dataset, n.partition_value AS network, p.partition_value AS "partition",
           d.record_count AS rows, d.file_size_bytes AS bytes,
           TRY_CAST(st.min_value AS BIGINT) AS min_block, TRY_CAST(st.max_value AS BIGINT) AS max_block,
           split_part(c.commit_message, '/', 1) AS run_id, s.snapshot_time AS written_at, d.begin_snapshot AS snapshot_id
    FROM ducklake_data_file d
    JOIN ducklake_table t ON t.table_id = d.table_id AND t.end_snapshot IS NULL
    JOIN ducklake_schema sc ON sc.schema_id = t.schema_id AND sc.end_snapshot IS NULL
    LEFT JOIN ducklake_file_partition_value n ON n.data_file_id = d.data_file_id AND n.partition_key_index = 0
    LEFT JOIN ducklake_file_partition_value p ON p.data_file_id = d.data_file_id AND p.partition_key_index = 1
    LEFT JOIN (VALUES ${blocks.length ? blocks.join(', ') : "('', '')"}) AS b(dataset, column_name) ON b.dataset = t.table_name
    LEFT JOIN ducklake_column bc ON bc.table_id = d.table_id AND bc.column_name = b.column_name AND bc.end_snapshot IS NULL
    LEFT JOIN ducklake_file_column_stats st ON st.data_file_id = d.data_file_id AND st.column_id = bc.column_id
    LEFT JOIN ducklake_snapshot_changes c ON c.snapshot_id = d.begin_snapshot
    LEFT JOIN ducklake_snapshot s ON s.snapshot_id = d.begin_snapshot
    WHERE d.end_snapshot IS NULL`;
}

/**
 * The SELECT of each table's view at a snapshot (the newest by default): its files' rows through the DuckLake
 * reader (field ids to column names), or no rows of the shape's types when the table has no file.
 */
export async function lakeViewBodies(db: CatalogDb, dataPath: string, shapes: readonly TableShape[], snapshot?: number): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  if (shapes.length === 0) return out;
  const at = snapshot ?? (await currentSnapshot(db)).snapshotId;
  const tables = new Map((await listTables(db, at)).filter((t) => t.schema.name === 'main').map((t) => [t.name, t]));
  const columns = await listAllColumns(db, at);
  for (const shape of shapes) {
    const table = tables.get(shape.name);
    const files = table ? await listDataFiles(db, table, at, dataPath) : [];
    // Rows another DuckLake writer inlined into the catalog are read from it (the views live in the same database).
    const inlined = table ? await listInlinedData(db, table) : [];
    out.set(
      shape.name,
      table && (files.length || inlined.length)
        ? scanSql(table, columns.get(table.tableId) ?? [], files, at, inlined)
        : emptyTypedSelect(shape, partitionColumnsOf(shape, '')),
    );
  }
  return out;
}

/** The columns every table has after its shape's: the partition columns. */
function partitionColumnsOf(shape: TableShape, partitionDoc: string): LakeColumn[] {
  return [
    { name: 'network', type: 'VARCHAR', doc: 'Network: mainnet or testnet (partition).' },
    { name: shape.partition, type: 'DATE', doc: partitionDoc },
  ];
}

function tableComments(): string[] {
  return [
    `COMMENT ON TABLE lake_meta IS ${literal(LAKE_META_DOC)}`,
    ...ledgerComments(),
    `COMMENT ON TABLE ${REQUESTS_TABLE} IS ${literal(REQUESTS_DOC)}`,
    ...REQUESTS_COLUMNS.map((c) => `COMMENT ON COLUMN ${REQUESTS_TABLE}.${ident(c.name)} IS ${literal(c.doc)}`),
  ];
}

function viewDoc(def: DatasetDef): string {
  return `${def.doc} Natural key: (${def.naturalKey.join(', ')}). Partitioned by network, ${def.partition}.`;
}

function partitionDoc(def: DatasetDef): string {
  const what =
    def.partition === 'block_date'
      ? 'UTC date of the block'
      : def.partition === 'snapshot_date'
        ? 'UTC date of the run that took the snapshot'
        : 'UTC date of the data point';
  return `${what} (partition).`;
}

/** The files of a table at the lake's newest snapshot (of one network, when given): absolute paths; none without a catalog. */
export async function currentTableFiles(paths: LakePaths, table: string, network?: string): Promise<string[]> {
  if (!existsSync(paths.catalog)) return [];
  const lake = await Catalog.hold(paths, (c) => c.lakeState());
  return lake.tableFiles(table, network);
}
