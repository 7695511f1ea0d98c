/**
 * `chainlake catalog rebuild --catalog`: the distributed lake's counterpart of a local catalog rebuild. A local
 * rebuild re-derives what `catalog.duckdb` holds from the lake's files; a distributed lake's catalog is its PostgreSQL
 * database, which no file can rebuild. What chainlake derives there it re-creates: the control plane's tables and
 * columns (the same idempotent setup every `enqueue` and `worker` runs; PostgreSQL has no view of chainlake's) and the
 * DuckLake table of every dataset the ledger says was committed. Then it checks the lake against its store: files the
 * catalog names that the store lacks, files the store holds that nothing names (orphans), datasets whose windows say
 * committed but which have no table. It deletes nothing; `forgetMissing` ends the newest snapshot's missing files in a
 * new snapshot (their rows are already unreadable), so that the lake reads again.
 */
import { randomUUID } from 'node:crypto';
import { DATASETS } from '../datasets/registry.js';
import { catalogFiles, type CatalogFile } from '../ducklake/files.js';
import { currentSnapshot, dataPathOf, listTables } from '../ducklake/reader.js';
import { commitTables } from '../ducklake/writer.js';
import { againIfLakeChanged } from '../ducklake/conflicts.js';
import { testHook } from '../load/test-hooks.js';
import { datasetShape } from '../load/schema.js';
import { ensureTable } from '../load/write/lake-tables.js';
import { voidWatermarks } from '../load/ledger/watermarks.js';
import { confirmLease, releaseLease, takeLease } from './lease.js';
import { CATALOG_SCHEMA, CONTROL_SCHEMA, ControlPlaneError, controlLedger, openCatalog, redactUrl, setupControlPlane } from './control-plane.js';
import { norm, unreferencedFiles } from './maintain.js';
import { openStore, storeLocationOf, type Store, type StoreConnection } from './store.js';

export interface MissingFile {
  table: string | null;
  kind: 'data' | 'delete';
  location: string;
  rows: number | null;
  /** network, date: the partition the file holds. */
  partition: readonly string[];
  /** The snapshots that list it: from `fromSnapshot` up to (not including) `untilSnapshot`; null: the newest too. */
  fromSnapshot: number | null;
  untilSnapshot: number | null;
}

export interface LostTable {
  dataset: string;
  /** Windows the ledger says committed (or provisional) for it. */
  windows: number;
  rows: number;
  runs: string[];
}

export interface DistributedRebuildReport {
  /** The catalog, its password redacted. */
  catalog: string;
  store: string;
  /** Control-plane tables created again (their rows were lost), as `chainlake.<table>`. */
  recreatedTables: string[];
  /** Columns added again to existing tables (NULL or their default in every existing row), as `chainlake.<table>.<column>`. */
  recreatedColumns: string[];
  /** DuckLake tables created again (empty) for datasets the ledger says were committed. */
  recreatedLakeTables: string[];
  /** True when the database has no DuckLake catalog (schema `ducklake`): nothing of the lake can be read. */
  catalogMissing: boolean;
  /** Files the catalog names that the store lacks. */
  missingFiles: MissingFile[];
  /** Set when `forgetMissing` ended the newest snapshot's missing files: the snapshot that did. */
  forgotten: { snapshotId: number; files: number } | null;
  /** Files in the store nothing names (`maintain --catalog` removes them once older than its grace period). */
  orphans: { location: string; area: 'lake' | 'fragments'; modifiedAt: string }[];
  /** Datasets with committed windows and no table in the newest snapshot. */
  lostTables: LostTable[];
  /** What could not be done now (another committer held the lease), with what to do. */
  notDone: string[];
  /** Every file the catalog names is in the store, every committed dataset has its table, and the catalog exists. */
  whole: boolean;
}

/** Long enough for a few catalog statements; renewed by nothing, so it bounds how long a crashed rebuild holds it. */
const REBUILD_LEASE_SECONDS = 120;

export async function rebuildDistributedCatalog(opts: {
  catalog: string;
  store?: string;
  storeConnection?: StoreConnection;
  forgetMissing?: boolean;
}): Promise<DistributedRebuildReport> {
  const { client, catalog } = await openCatalog(opts.catalog);
  const holder = `catalog-rebuild-${randomUUID()}`;
  try {
    const report: DistributedRebuildReport = {
      catalog: redactUrl(opts.catalog),
      store: opts.store ?? '',
      ...(await setUpAgain(client)),
      recreatedLakeTables: [],
      catalogMissing: false,
      missingFiles: [],
      forgotten: null,
      orphans: [],
      lostTables: [],
      notDone: [],
      whole: false,
    };
    const hasCatalog = await client.query(`SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'ducklake_metadata'`, [
      CATALOG_SCHEMA,
    ]);
    if (hasCatalog.rowCount === 0) {
      report.catalogMissing = true;
      if (opts.store) report.orphans = await storeOnly(opts.store, opts.storeConnection);
      return report;
    }
    const store = await openStore(opts.store ?? storeLocationOf(await dataPathOf(catalog)), opts.storeConnection);
    report.store = store.location;
    try {
      const lake: Rebuild = { client, catalog, store, holder, report };
      const tables = await recreateLostTables(lake);
      // Another DuckLake writer's commit to a table since its files were read (it may have ended, and cleaned up, a
      // file found missing) refuses the forgetting: the files are read again (againIfLakeChanged).
      if (opts.forgetMissing)
        await againIfLakeChanged(
          async () => forgetMissing(lake, await findMissingFiles(lake), tables),
          () => undefined,
        );
      else await findMissingFiles(lake);
      report.orphans = (await unreferencedFiles(client, catalog, store)).map((f) => ({
        location: f.location,
        area: f.area,
        modifiedAt: new Date(f.modifiedMs).toISOString(),
      }));
    } finally {
      await store.close();
    }
    report.whole = report.missingFiles.length === 0 && report.lostTables.length === 0;
    return report;
  } catch (error) {
    if (error instanceof Error && /permission denied|must be owner/i.test(error.message)) {
      throw new ControlPlaneError(
        `catalog rebuild on ${redactUrl(opts.catalog)}: ${error.message}`,
        'run it as the role that owns the chainlake and ducklake schemas (the one enqueue and the workers use)',
        error,
      );
    }
    throw error;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** What each step of a rebuild works on, and the report it fills. */
interface Rebuild {
  client: Awaited<ReturnType<typeof openCatalog>>['client'];
  catalog: Awaited<ReturnType<typeof openCatalog>>['catalog'];
  store: Store;
  holder: string;
  report: DistributedRebuildReport;
}

/**
 * The control plane set up again (the same setup as every enqueue and worker, without creating a DuckLake catalog
 * where one is missing): the tables and columns that setup had to create.
 */
async function setUpAgain(client: Rebuild['client']): Promise<Pick<DistributedRebuildReport, 'recreatedTables' | 'recreatedColumns'>> {
  const before = await controlColumns(client);
  await setupControlPlane(client, undefined);
  await client.query(`SET search_path TO ${CATALOG_SCHEMA}`);
  const after = await controlColumns(client);
  return {
    recreatedTables: [...after.keys()].filter((t) => !before.has(t)).map((t) => `${CONTROL_SCHEMA}.${t}`),
    recreatedColumns: [...after].flatMap(([t, cols]) =>
      before.has(t) ? [...cols].filter((c) => !before.get(t)!.has(c)).map((c) => `${CONTROL_SCHEMA}.${t}.${c}`) : [],
    ),
  };
}

/** Without a catalog, every lake file of the store is an orphan. */
async function storeOnly(location: string, connection: StoreConnection | undefined): Promise<DistributedRebuildReport['orphans']> {
  const store = await openStore(location, connection);
  try {
    return (await store.list('lake')).map((f) => ({ location: f.location, area: 'lake', modifiedAt: new Date(f.modifiedMs).toISOString() }));
  } finally {
    await store.close();
  }
}

/**
 * Datasets the ledger says were committed but the newest snapshot has no table of: reported, and created again
 * (empty) under the lease, their watermarks deleted first (the void planning decides for a table another writer
 * dropped, load/ledger/planning.ts voidClaims): the next enqueue plans their whole range, not only the blocks after
 * marks the new table would be taken to hold. Returns the tables of the newest snapshot (before any was created again).
 */
async function recreateLostTables(lake: Rebuild): Promise<Set<string>> {
  const { client, catalog, report } = lake;
  const committed = await client.query<{ dataset: string; windows: string; rows: string | null; runs: string[] }>(
    `SELECT dataset, count(*) AS windows, sum(rows_got) AS rows, array_agg(DISTINCT run_id) AS runs FROM ${CONTROL_SCHEMA}.windows
     WHERE status IN ('committed', 'provisional') GROUP BY dataset ORDER BY dataset`,
  );
  const tables = new Set((await listTables(catalog, (await currentSnapshot(catalog)).snapshotId)).filter((t) => t.schema.name === 'main').map((t) => t.name));
  for (const r of committed.rows) {
    if (tables.has(r.dataset)) continue;
    report.lostTables.push({ dataset: r.dataset, windows: Number(r.windows), rows: Number(r.rows ?? 0), runs: [...r.runs].sort() });
  }
  const shapes = report.lostTables
    .map((l) => DATASETS[l.dataset])
    .filter((d) => d !== undefined)
    .map(datasetShape);
  if (shapes.length) {
    await underLease(lake, 'the lost tables were not created again', async () => {
      for (const shape of shapes) {
        await voidWatermarks(controlLedger(client), [shape.name]);
        await ensureTable(catalog, shape, { recreate: true });
        report.recreatedLakeTables.push(shape.name);
      }
    });
  }
  return tables;
}

/**
 * The files the catalog names that the store lacks, reported, and the snapshot they were read at. The catalog is read
 * before the store is listed: a file another writer adds is in the store before its snapshot names it, so a file
 * named here and not listed after is missing, not one written meanwhile.
 */
async function findMissingFiles(lake: Rebuild): Promise<{ missing: (CatalogFile & { kind: 'data' | 'delete' })[]; readAt: number }> {
  const { catalog, store, report } = lake;
  const readAt = (await currentSnapshot(catalog)).snapshotId;
  const named = (await catalogFiles(catalog, store.dataPath)).filter((f): f is CatalogFile & { kind: 'data' | 'delete' } => f.kind !== 'scheduled');
  await testHook('rebuild-read');
  const stored = new Set((await store.list('lake')).map((f) => norm(f.location)));
  const missing = named.filter((f) => !stored.has(norm(f.location)));
  report.missingFiles = missing.map((f) => ({
    table: f.table,
    kind: f.kind,
    location: f.location,
    rows: f.rows,
    partition: f.partition,
    fromSnapshot: f.beginSnapshot,
    untilSnapshot: f.endSnapshot,
  }));
  return { missing, readAt };
}

/** Ends the newest snapshot's missing files in a snapshot of their own (their rows are unreadable already), under the lease. */
async function forgetMissing(lake: Rebuild, found: { missing: readonly CatalogFile[]; readAt: number }, tables: ReadonlySet<string>): Promise<void> {
  const { missing, readAt } = found;
  const { catalog, holder, report } = lake;
  const current = missing.filter((f) => f.endSnapshot === null && f.table !== null && f.dataFileId !== null);
  if (current.length === 0) return;
  await underLease(lake, 'the missing files were not forgotten', async () => {
    const byTable = new Map<string, number[]>();
    for (const f of current) byTable.set(f.table!, [...(byTable.get(f.table!) ?? []), f.dataFileId!]);
    const result = await commitTables(catalog, {
      tables: [...byTable].filter(([t]) => tables.has(t)).map(([tableName, endFiles]) => ({ tableName, files: [], endFiles })),
      // Ends only what was read missing at readAt: a later commit to one of these tables is refused (LakeChangedError).
      readAt,
      author: holder,
      message: `chainlake catalog rebuild: files missing from the store ended`,
      inTransaction: (tx) => confirmLease(tx, { holder, leaseSeconds: REBUILD_LEASE_SECONDS }),
    });
    report.forgotten = { snapshotId: result.snapshotId, files: result.endedFiles };
  });
}

/** Runs `work` holding the committer lease, so that no worker commits meanwhile; without it, says what was not done. */
async function underLease(lake: Rebuild, what: string, work: () => Promise<void>): Promise<void> {
  if (!(await takeLease(lake.client, lake.holder, REBUILD_LEASE_SECONDS))) {
    lake.report.notDone.push(`${what}: a worker holds the commit lease; run catalog rebuild again once the workers have committed`);
    return;
  }
  try {
    await work();
  } finally {
    await releaseLease(lake.client, lake.holder).catch(() => undefined);
  }
}

/** chainlake's tables in the control plane and their columns. */
async function controlColumns(client: Parameters<typeof takeLease>[0]): Promise<Map<string, Set<string>>> {
  const rows = await client.query(`SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = $1`, [CONTROL_SCHEMA]);
  const out = new Map<string, Set<string>>();
  for (const r of rows.rows) {
    const t = String(r.table_name);
    out.set(t, (out.get(t) ?? new Set()).add(String(r.column_name)));
  }
  return out;
}
