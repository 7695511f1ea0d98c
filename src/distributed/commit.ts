/**
 * The committer: exactly one at a time (a lease row in the control plane, taken by whichever worker finds it
 * free or expired). It folds fetched fragments into the DuckLake: for each dataset, the partitions the
 * fragments touch are merged with the rows those partitions hold (one row per natural key, the rule of a
 * single-machine commit), written as new immutable files, and committed as ONE snapshot that ends the
 * partitions' old files, in ONE PostgreSQL transaction that also marks the windows committed, advances the
 * watermarks and closes finished runs — and first checks that this committer still holds the lease, so a
 * committer that stalled past its lease cannot commit behind its successor's back.
 */
import type { RequestRecord } from '../extract/request-log.js';
import { decodeCalls, insertRequests } from '../load/ledger/requests.js';
import type { DuckDBConnection } from '@duckdb/node-api';
import pLimit from 'p-limit';
import type pg from 'pg';
import type { CatalogDb } from '../ducklake/catalog-db.js';
import { copyTableFile, measureTableFiles, type CopiedTableFile } from '../ducklake/data-file.js';
import { commitTables, type StagedFile } from '../ducklake/writer.js';
import { againIfLakeChanged, COMMIT_ATTEMPTS, LakeChangedError } from '../ducklake/conflicts.js';
import { getDataset } from '../datasets/registry.js';
import { createUnorderedTempTable, type Engine } from '../load/engine.js';
import { datasetShape, noFreshRows, REJECTS_SHAPE, STAGED_PARTITION, type DeclaredTable, type TableShape } from '../load/schema.js';
import { ident, literal, literalList } from '../load/sql.js';
import type { SliceHook } from '../load/write/merge-slices.js';
import { mergeTable } from '../load/write/merge-table.js';
import type { DecodedDataset } from '../decode/datasets.js';
import { SliceDecoding, type DecodedTarget } from '../decode/in-commit.js';
import { distinctDatasets } from '../decode/decode.js';
import { declaredTables, decodedShape } from '../decode/lake.js';
import { declareTables } from '../load/ledger/declared-tables.js';
import type { Ledger } from '../load/ledger/windows.js';
import { dropReplacedRejects, findReplacedRejects, KEEP_REJECT } from '../decode/rejects.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Network } from '../datasets/dataset.js';
import { isProvisional } from '../pipeline/plan.js';
import type { BlockRange } from '../extract/pager.js';
import type { ScopeRange } from '../load/write/replace.js';
import type { WindowSpec } from './windows.js';
import type { Logger } from '../pipeline/log.js';
import { testHook } from '../load/test-hooks.js';
import { confirmLease, underLease } from './lease.js';
import { readLake } from './lake-rows.js';
import { mergeShape, type LakeState } from '../load/write/lake-state.js';
import type { LakeColumn, LakeTable } from '../ducklake/reader.js';
import { CONTROL_SCHEMA } from './control-plane.js';
import { recordCommitted } from '../load/ledger/windows.js';
import { advanceWatermark, raiseWatermarks, readWatermark } from '../load/ledger/watermarks.js';
import { droppedTables, refuseReplaced } from '../load/write/dropped-tables.js';
import { closeEndedRuns } from './runs.js';
import { ensureTable } from '../load/write/lake-tables.js';
import type { Store } from './store.js';
import { commitMessage } from '../load/catalog.js';

/** The one ledger in the control plane, in a commit's catalog transaction. */
const LEDGER = (tx: CatalogDb): Ledger => ({ db: tx, schema: CONTROL_SCHEMA });
/** Datasets of a batch merged side by side (the single machine's commit prepares two at once too). */
const MERGES_AT_ONCE = 2;

interface FetchedWindow {
  runId: string;
  windowId: string;
  dataset: string;
  network: string;
  scopeKey: string;
  fragment: string | null;
  rejectFragment: string | null;
  rows: number;
  /** The calls its worker made (lineage). */
  calls: RequestRecord[];
  /** Window.final of the window's run (finality), when the job has an unfinal zone. */
  final?: number;
  /** The window's blocks (those it covered), when it is block-ranged. */
  range?: BlockRange;
  /** Set when the window was fetched again over what the lake holds: its rows replace the lake's (load/write/replace.ts). */
  replacing?: ScopeRange;
}

export interface CommitDeps {
  /** The DuckLake catalog's connection (search_path ducklake); chainlake's tables are named with their schema. */
  catalog: CatalogDb;
  engine: Engine;
  store: Store;
  holder: string;
  leaseSeconds: number;
  log: Logger;
  /** Fresh rows merged at once (default MERGE_SLICE_ROWS). */
  sliceRows?: number;
  /** Test seam: runs inside the commit transaction just before COMMIT. */
  beforeCommit?: () => Promise<void>;
  /** Test seam: runs once a batch's merges are written, before its catalog transaction (another writer may commit then). */
  merged?: () => Promise<void>;
}

/**
 * A dataset's table another DuckLake writer dropped is created again when the ledger has no mark of it: `enqueue`
 * deleted them as it voided the claims (load/ledger/planning.ts voidClaims) and queued the whole range. With marks
 * left, it was dropped after the run was planned, and the commit refuses (lake-tables.ts refuseEndedTables);
 * `_rejects` and derived tables as load/write/dropped-tables.ts says.
 */
const droppedUnclaimed = (deps: CommitDeps) => droppedTables(LEDGER(deps.catalog));

/** `attempt` again while another DuckLake writer changed the tables it read (againIfLakeChanged), saying so in the log. */
function preparedAgain<T>(log: Logger, what: string, attempt: () => Promise<T>): Promise<T> {
  return againIfLakeChanged(attempt, (error, next) =>
    log.log('warn', 'commit.lake_changed', `${what}: ${error.message}; preparing it again from the new rows (attempt ${next} of ${COMMIT_ATTEMPTS})`, {
      snapshot: error.later[0]!.snapshotId,
      attempt: next,
    }),
  );
}

/** Windows one commit takes at most, by default: a batch's windows are read, and recorded, in one statement each. */
export const COMMIT_WINDOWS = 2000;

/**
 * Windows fetched and waiting for the committer, oldest first, up to about `maxRows` rows and `maxWindows` windows;
 * of run `runId` only, when given (`verify --repair`: its snapshot holds its own windows, never another job's).
 */
export async function fetchedWindows(catalog: CatalogDb, maxRows: number, maxWindows = COMMIT_WINDOWS, runId?: string): Promise<FetchedWindow[]> {
  const rows = await catalog.query(
    `SELECT run_id, window_id, dataset, network, scope, fragment_path, reject_path, rows_got, request_log, from_block, to_block, CAST(spec AS TEXT) AS spec FROM ${CONTROL_SCHEMA}.windows
     WHERE status = 'fetched'${runId === undefined ? '' : ' AND run_id = $2'} ORDER BY updated_at, run_id, window_id LIMIT $1`,
    runId === undefined ? [maxWindows] : [maxWindows, runId],
  );
  const out: FetchedWindow[] = [];
  let total = 0;
  for (const r of rows) {
    const n = Number(r.rows_got ?? 0);
    if (out.length > 0 && total + n > maxRows) break;
    total += n;
    const spec = JSON.parse(String(r.spec)) as WindowSpec;
    const range = r.from_block !== null && r.from_block !== undefined ? { from: Number(r.from_block), to: Number(r.to_block) } : (spec.range ?? undefined);
    const endpoint = spec.replaces && range ? getDataset(spec.dataset).endpoints.find((e) => e.id === spec.endpoint) : undefined;
    out.push({
      ...(spec.final === undefined ? {} : { final: spec.final }),
      ...(range ? { range } : {}),
      ...(endpoint && range ? { replacing: { endpoint, scope: spec.scope, range, ...(spec.times ? { times: spec.times } : {}) } } : {}),
      runId: String(r.run_id),
      windowId: String(r.window_id),
      dataset: String(r.dataset),
      network: String(r.network),
      scopeKey: String(r.scope),
      fragment: r.fragment_path === null ? null : String(r.fragment_path),
      rejectFragment: r.reject_path === null ? null : String(r.reject_path),
      rows: n,
      calls: decodeCalls(r.request_log),
    });
  }
  return out;
}

/**
 * Commits one batch of what is fetched (about `batchRows` rows and at most `batchWindows` windows, oldest first; of
 * run `runId` only, when given) and returns the windows committed;
 * the worker's loop calls again while more is due, so a stop or a lost lease is noticed between batches even when
 * other workers keep fetching. Throws LeaseLostError when the lease went to another worker meanwhile.
 */
export async function commitFetched(deps: CommitDeps, batchRows: number, batchWindows = COMMIT_WINDOWS, runId?: string): Promise<number> {
  const { windows, decoding } = await oneDecoding(deps.catalog, await fetchedWindows(deps.catalog, batchRows, batchWindows, runId));
  if (windows.length > 0) await commitBatch(deps, windows, decoding);
  return windows.length;
}

/** How a batch's event logs are decoded: the datasets of their run's `decode` key (resolved at enqueue), as that run. */
interface BatchDecoding {
  datasets: DecodedDataset[];
  runId: string;
  ingestedAt: string;
  network: string;
}

/**
 * The batch cut to event logs of one decoding: those of one run whose job decodes (its datasets, its `_run_id`
 * and `_ingested_at` on the decoded rows, as one machine's run writes them), or those of runs that decode none.
 * Other datasets' windows all stay; the event logs left out are the next batch's.
 */
async function oneDecoding(catalog: CatalogDb, windows: FetchedWindow[]): Promise<{ windows: FetchedWindow[]; decoding?: BatchDecoding }> {
  const logRuns = [...new Set(windows.filter((w) => w.dataset === EVENT_LOGS).map((w) => w.runId))];
  if (logRuns.length === 0) return { windows };
  const rows = await catalog.query(
    `SELECT run_id, ingested_at, CAST(decode AS TEXT) AS decode FROM ${CONTROL_SCHEMA}.runs WHERE run_id IN (${logRuns.map((_, i) => `$${i + 1}`).join(', ')}) AND decode IS NOT NULL`,
    logRuns,
  );
  const decodes = new Map(
    rows.map((r) => [String(r.run_id), { datasets: JSON.parse(String(r.decode)) as DecodedDataset[], ingestedAt: String(r.ingested_at) }]),
  );
  const first = windows.find((w) => w.dataset === EVENT_LOGS)!;
  const key = (w: FetchedWindow): string => (decodes.has(w.runId) ? w.runId : '');
  const kept = windows.filter((w) => w.dataset !== EVENT_LOGS || key(w) === key(first));
  const run = decodes.get(first.runId);
  return { windows: kept, ...(run ? { decoding: { ...run, runId: first.runId, network: first.network } } : {}) };
}

/** One table's merge of a batch: its fragments of one network, and its windows fetched again. */
interface BatchMerge {
  shape: TableShape;
  network: string;
  fragments: string[];
  replacing: ScopeRange[];
}

/**
 * The merges a batch makes (each network's rejects, each dataset's per network, those with nothing to merge left
 * out), and every dataset table it commits: a dataset's table exists once a window of it is committed, rows or none.
 */
function batchMerges(windows: readonly FetchedWindow[]): { merges: BatchMerge[]; datasets: TableShape[] } {
  const groups = new Map<string, { shape: TableShape; network: string; windows: FetchedWindow[] }>();
  for (const w of windows) {
    const key = `${w.dataset}\u0000${w.network}`;
    const group = groups.get(key) ?? { shape: datasetShape(getDataset(w.dataset)), network: w.network, windows: [] };
    group.windows.push(w);
    groups.set(key, group);
  }
  const merges: BatchMerge[] = [
    ...[...new Set(windows.map((w) => w.network))].map((network) => ({
      shape: REJECTS_SHAPE,
      network,
      fragments: windows.filter((w) => w.network === network).flatMap((w) => (w.rejectFragment ? [w.rejectFragment] : [])),
      replacing: [],
    })),
    ...[...groups.values()].map((g) => ({
      shape: g.shape,
      network: g.network,
      fragments: g.windows.flatMap((w) => (w.fragment ? [w.fragment] : [])),
      replacing: g.windows.flatMap((w) => (w.replacing ? [w.replacing] : [])),
    })),
  ];
  return { merges: merges.filter((m) => m.fragments.length > 0 || m.replacing.length > 0), datasets: [...groups.values()].map((g) => g.shape) };
}

/** What a snapshot changes, table by table, gathered as the merges end: new files, and the partitions they replace. */
class SnapshotChanges {
  private readonly tables = new Map<string, { tableName: string; files: StagedFile[]; replacePartitions: string[][] }>();
  /** The oldest snapshot the merges read the lake at: the commit fails if another writer changed its tables since. */
  readAt: number | undefined;

  /** A lake state a merge read. */
  read(snapshot: number): void {
    this.readAt = this.readAt === undefined ? snapshot : Math.min(this.readAt, snapshot);
  }

  add(table: string, files: readonly StagedFile[], replaced: readonly string[][]): void {
    const c = this.tables.get(table) ?? { tableName: table, files: [], replacePartitions: [] };
    c.files.push(...files);
    c.replacePartitions.push(...replaced);
    this.tables.set(table, c);
  }

  /** Every file written so far (the files of a commit that did not happen are nobody's). */
  get files(): StagedFile[] {
    return [...this.tables.values()].flatMap((c) => c.files);
  }

  /** The tables the snapshot changes. */
  get changed(): { tableName: string; files: StagedFile[]; replacePartitions: string[][] }[] {
    return [...this.tables.values()].filter((c) => c.files.length > 0 || c.replacePartitions.length > 0);
  }
}

/**
 * One batch as ONE snapshot: each dataset's partitions the batch touches and the rejects it brings, with the
 * windows, watermarks and runs in the same catalog transaction — a reader sees the whole batch or none of it, as
 * it sees a single machine's commit. The rejects' key is the whole record, so merging them again is harmless.
 */
async function commitBatch(deps: CommitDeps, windows: readonly FetchedWindow[], decode?: BatchDecoding): Promise<void> {
  await preparedAgain(deps.log, `commit of ${windows.length} windows`, () => commitBatchOnce(deps, windows, decode));
}

/** commitBatch's one attempt: its files are removed when it fails. */
async function commitBatchOnce(deps: CommitDeps, windows: readonly FetchedWindow[], decode?: BatchDecoding): Promise<void> {
  const started = Date.now();
  const { merges, datasets } = batchMerges(windows);
  const fragments = windows.flatMap((w) => [w.fragment, w.rejectFragment].filter((f): f is string => f !== null));
  const changes = new SnapshotChanges();
  let snapshot: number;
  let decoding: CommittedDecoding | undefined;
  try {
    // Tables are created or widened first, one at a time: that is a catalog transaction, and the merges share
    // the catalog's connection. A decoded dataset's table exists once its job's logs are committed (empty when no
    // log decodes, as on one machine); the decoding's rejects go to `_rejects`, which a batch without fetch
    // rejects has not needed yet.
    const decodedShapes = decode ? [...distinctDatasets(decode.datasets).map(decodedShape), REJECTS_SHAPE] : [];
    const shapes = new Map([...merges.map((m) => m.shape), ...datasets, ...decodedShapes].map((shape) => [shape.name, shape]));
    // A table another writer dropped and created again: refused as on one machine (dropped-tables.ts refuseReplaced).
    await refuseReplaced(LEDGER(deps.catalog))([...shapes.values()]);
    for (const shape of shapes.values()) await ensureTable(deps.catalog, shape, { voided: droppedUnclaimed(deps) });
    if (decode) decoding = await CommittedDecoding.open(deps, decode, decodedShapes);
    if (decoding) changes.read(decoding.readAt);
    await mergeBatch(deps, merges, changes, decode && decoding ? { decode, decoding } : undefined);
    await testHook('lake-files');
    await deps.merged?.();
    const result = await commitTables(deps.catalog, {
      tables: changes.changed,
      ...(changes.readAt === undefined ? {} : { readAt: changes.readAt }),
      author: deps.holder,
      message: commitMessage(
        windows.map((w) => w.runId),
        `commit of ${windows.filter((w) => w.fragment).length} fragments`,
      ),
      inTransaction: async (tx, snapshotId) => {
        await markCommitted(tx, deps, windows, snapshotId);
        // The decoded tables' declarations, as a single machine's decoding commit makes them (compaction reads them).
        if (decode) await declareTables(LEDGER(tx), declaredTables(decode.datasets));
      },
    });
    snapshot = result.snapshotId;
  } catch (error) {
    // The files of a commit that did not happen are nobody's (a decoding's too, counted here or not yet).
    await removeFiles(deps.store, [...changes.files, ...(decoding?.written ?? [])]);
    throw error;
  } finally {
    await decoding?.close().catch(() => undefined);
  }
  await testHook('lake-committed');
  await Promise.all(fragments.map((f) => deps.store.remove(f)));
  logCommit(deps, windows, snapshot, Date.now() - started);
}

/**
 * A batch's merges, as a single machine's commit makes them: the datasets side by side (each is a few statements
 * over small files, which leave the engine's second thread idle), event_logs with the decoding on its slices, then
 * the decoded days, then the rejects last (a decoding adds its own, and replaces those of the logs it decodes
 * again). Every merge ends before anything is decided.
 */
async function mergeBatch(
  deps: CommitDeps,
  merges: readonly BatchMerge[],
  changes: SnapshotChanges,
  decoding?: { decode: BatchDecoding; decoding: CommittedDecoding },
): Promise<void> {
  const limit = pLimit(MERGES_AT_ONCE);
  const mergeAll = async (list: readonly BatchMerge[], extra: (m: BatchMerge) => MergeExtra) => {
    const merged = await Promise.allSettled(list.map((m) => limit(() => mergeFragments(deps, m.shape, m.network, m.fragments, m.replacing, extra(m)))));
    merged.forEach((r, i) => {
      if (r.status !== 'fulfilled') return;
      changes.add(list[i]!.shape.name, r.value.files, r.value.replaced);
      if (r.value.readAt >= 0) changes.read(r.value.readAt);
    });
    const failed = merged.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  };
  const network = decoding?.decode.network;
  await mergeAll(
    merges.filter((m) => m.shape !== REJECTS_SHAPE),
    (m) => (decoding && m.shape.name === EVENT_LOGS && m.network === network ? { derive: decoding.decoding } : {}),
  );
  const rejectMerges = merges.filter((m) => m.shape === REJECTS_SHAPE);
  if (!decoding) return mergeAll(rejectMerges, () => ({}));
  const decoded = await decoding.decoding.decoded();
  if (!decoded) throw decoding.decoding.failure!;
  // The decoded days' files together, as a merge's (the commit's merges have ended: its connection is free).
  const copied = decoded.files.flatMap((f) => (f.file ? [f.file] : []));
  const staged = await storeFiles(deps.engine.conn, deps.store, copied);
  for (const f of decoded.files) changes.add(f.table, f.file ? [staged.get(f.file)!] : [], [[network!, f.partition]]);
  if ((decoded.rejects || decoded.replacedRejectDays.length) && !rejectMerges.some((m) => m.network === network))
    rejectMerges.push({ shape: REJECTS_SHAPE, network: network!, fragments: [], replacing: [] });
  await mergeAll(rejectMerges, (m) =>
    m.network === network
      ? {
          ...(decoded.rejects
            ? { fresh: `SELECT *, ${literal(decoding.decode.ingestedAt.slice(0, 10))} AS ${ident(STAGED_PARTITION)} FROM (${decoded.rejects})` }
            : {}),
          // Only where rejects of the same logs were found (KEEP_REJECT reads what findReplacedRejects found).
          ...(decoded.replacedRejectDays.length ? { keep: KEEP_REJECT, partitions: decoded.replacedRejectDays } : {}),
        }
      : {},
  );
}

function logCommit(deps: CommitDeps, windows: readonly FetchedWindow[], snapshot: number, ms: number): void {
  const rows = windows.reduce((n, w) => n + w.rows, 0);
  const datasets = [...new Set(windows.map((w) => w.dataset))];
  deps.log.log('info', 'commit', `committed ${windows.length} windows of ${datasets.join(', ')} (${rows} rows) as snapshot ${snapshot} in ${ms} ms`, {
    datasets,
    windows: windows.length,
    rows,
    snapshot,
    ms,
  });
}

/**
 * A table the lake derives from itself (the reconciliation), committed as ONE snapshot by the committer's own
 * merge (each touched partition merged with what it holds, one row per key), under the committer lease: it
 * writes the catalog as a committer does, so it waits for the lease instead of racing a worker's commit.
 * `fragments`: per network, Parquet files in the store with the staged partition column.
 */
export async function commitDerived(
  deps: CommitDeps,
  leases: Pick<pg.Client, 'query'>,
  declaration: DeclaredTable,
  fragments: ReadonlyMap<string, readonly string[]>,
  message: string,
  opts: LeasedCommitOptions = {},
): Promise<LeasedCommit> {
  return commitUnderLease(deps, leases, [{ shape: declaration.shape, fragments, declaration }], message, opts);
}

/** What a commit under the lease changes in one table. */
export interface LeasedChange {
  shape: TableShape;
  /** Per network, Parquet files in the store with the staged partition column. */
  fragments: ReadonlyMap<string, readonly string[]>;
  /** Per network, a relation of fresh rows of the engine (the shape's columns and the staged partition column). */
  fresh?: ReadonlyMap<string, string>;
  /** Per network, partitions merged with what they hold even when no fragment reaches them (compaction). */
  rewrite?: ReadonlyMap<string, readonly string[]>;
  /** A condition the merged partitions' current rows must meet to stay (a re-decoding's rejects: KEEP_REJECT). */
  keep?: string;
  /** A table beyond the registry: declared in the ledger by the commit's transaction. */
  declaration?: DeclaredTable;
}

/**
 * Changes to several tables as ONE snapshot, by the committer's merge, under the committer lease (taken here,
 * checked again inside the catalog transaction, released after): the derived tables and `compact --catalog`.
 */
export async function commitUnderLease(
  deps: CommitDeps,
  leases: Pick<pg.Client, 'query'>,
  changes: readonly LeasedChange[],
  message: string,
  opts: LeasedCommitOptions = {},
): Promise<LeasedCommit> {
  return underLease(deps, leases, message, () => commitLeased(deps, changes, message, opts));
}

/** What a commit under the lease made, for the caller's records in the same catalog transaction. */
export interface LeasedCommit {
  snapshotId: number;
  files: number;
  /** Rows and bytes of the files written. */
  rows: number;
  bytes: number;
}

export interface LeasedCommitOptions {
  /** The caller's records (its run's row) in the commit's catalog transaction. */
  record?: (tx: CatalogDb, committed: LeasedCommit) => Promise<void>;
  /** The hint's end when another DuckLake writer refused every attempt: what running the command again does. */
  runAgain?: string;
}

/** What a leased commit that did not happen leaves, in the hint of its LakeChangedError (a worker's says what it fetched). */
const LEASED_RUN_AGAIN = 'nothing of this command was committed (its tables are as they were); running it again reads the lake anew';

/**
 * Changes to several tables as ONE snapshot by the committer's merge, by a holder of the lease (underLease), which
 * the catalog transaction checks again.
 */
export function commitLeased(deps: CommitDeps, changes: readonly LeasedChange[], message: string, opts: LeasedCommitOptions = {}): Promise<LeasedCommit> {
  return preparedAgain(deps.log, message, () => commitLeasedOnce(deps, changes, message, opts)).catch((e: unknown) => {
    throw e instanceof LakeChangedError ? e.fetchedAgain(opts.runAgain ?? LEASED_RUN_AGAIN) : e;
  });
}

/** commitLeased's one attempt: its files are removed when it fails. */
async function commitLeasedOnce(deps: CommitDeps, changes: readonly LeasedChange[], message: string, opts: LeasedCommitOptions): Promise<LeasedCommit> {
  const written: StagedFile[] = [];
  let readAt: number | undefined;
  try {
    const tables: { tableName: string; files: StagedFile[]; replacePartitions: string[][] }[] = [];
    for (const change of changes) {
      await ensureTable(deps.catalog, change.shape, { voided: droppedUnclaimed(deps) });
      const files: StagedFile[] = [];
      const replacePartitions: string[][] = [];
      for (const network of new Set([...change.fragments.keys(), ...(change.fresh?.keys() ?? []), ...(change.rewrite?.keys() ?? [])])) {
        const fresh = change.fresh?.get(network);
        const merged = await mergeFragments(deps, change.shape, network, change.fragments.get(network) ?? [], [], {
          partitions: change.rewrite?.get(network) ?? [],
          ...(fresh ? { fresh } : {}),
          ...(change.keep ? { keep: change.keep } : {}),
        });
        files.push(...merged.files);
        written.push(...merged.files);
        if (merged.readAt >= 0) readAt = readAt === undefined ? merged.readAt : Math.min(readAt, merged.readAt);
        replacePartitions.push(...merged.replaced);
      }
      tables.push({ tableName: change.shape.name, files, replacePartitions });
    }
    // Merged and written, the catalog untouched (as a worker's batch at this step): another writer may commit meanwhile.
    await testHook('lake-files');
    const result = await commitTables(deps.catalog, {
      tables: tables.filter((t) => t.files.length > 0 || t.replacePartitions.length > 0),
      ...(readAt === undefined ? {} : { readAt }),
      author: deps.holder,
      message,
      inTransaction: async (tx, snapshotId) => {
        await confirmLease(tx, deps);
        await declareTables(
          LEDGER(tx),
          changes.flatMap((c) => (c.declaration ? [c.declaration] : [])),
        );
        await opts.record?.(tx, leasedCommit(snapshotId, written));
      },
    });
    return leasedCommit(result.snapshotId, written);
  } catch (error) {
    await Promise.all(written.map((f) => deps.store.remove(deps.store.lakeLocation(f.fullPath)).catch(() => undefined)));
    throw error;
  }
}

const leasedCommit = (snapshotId: number, written: readonly StagedFile[]): LeasedCommit => ({
  snapshotId,
  files: written.length,
  rows: written.reduce((n, f) => n + f.recordCount, 0),
  bytes: written.reduce((n, f) => n + f.fileSizeBytes, 0),
});

/** Inside the commit's transaction: the lease still ours, the windows committed, watermarks, finished runs. */
async function markCommitted(tx: CatalogDb, deps: CommitDeps, windows: readonly FetchedWindow[], snapshotId: number): Promise<void> {
  await confirmLease(tx, deps);
  // Every window of the batch in one statement per status (a round trip per window made a large commit's
  // transaction long); a window reaching into the unfinal zone is committed as provisional (the next run fetches it
  // again); a window no longer fetched (committed twice?) is an error naming it.
  await recordCommitted(
    { db: tx, schema: CONTROL_SCHEMA },
    windows.map((w) => ({ runId: w.runId, windowId: w.windowId, provisional: isProvisional(w) })),
    snapshotId,
  );
  // Their calls move from the windows' rows to the requests ledger, in the transaction that commits them.
  await insertRequests(tx, windows, CONTROL_SCHEMA);
  const keys = new Map<string, FetchedWindow>();
  for (const w of windows) keys.set(`${w.runId}\u0000${w.dataset}\u0000${w.network}\u0000${w.scopeKey}`, w);
  for (const w of keys.values()) {
    const run = (await tx.query(`SELECT range_from FROM ${CONTROL_SCHEMA}.runs WHERE run_id = $1`, [w.runId]))[0];
    const ranges = (
      await tx.query(
        `SELECT from_block, to_block FROM ${CONTROL_SCHEMA}.windows
         WHERE run_id = $1 AND dataset = $2 AND network = $3 AND scope = $4 AND status IN ('committed', 'provisional') AND from_block IS NOT NULL`,
        [w.runId, w.dataset, w.network, w.scopeKey],
      )
    ).map((r) => ({ from: Number(r.from_block), to: Number(r.to_block) }));
    if (ranges.length === 0 || !run) continue;
    const ledger = { db: tx, schema: CONTROL_SCHEMA };
    const key = { network: w.network, dataset: w.dataset, scope: w.scopeKey };
    const before = await readWatermark(ledger, key, { lock: true });
    const { mark } = advanceWatermark(before, Number(run.range_from), ranges, w.final);
    if (mark === undefined || (before !== undefined && mark <= before)) continue;
    await raiseWatermarks(ledger, w.runId, [{ ...key, block: mark }]);
  }
  await closeEndedRuns(
    (text, values) => tx.query(text, values),
    windows.map((w) => w.runId),
  );
  await deps.beforeCommit?.();
  await testHook('lake-commit');
}

const EVENT_LOGS = 'event_logs';

/** A decoded day as the distributed committer wrote it: its file (measured and stored with the others: storeFiles) and partition. */
interface DecodedFile {
  table: string;
  partition: string;
  file: CopiedTableFile | null;
}

/**
 * The decoding of a batch's event logs in the distributed committer (decode/in-commit.ts, the same as one
 * machine's): each decoded day merged with what the catalog holds of it and written to the store, and the
 * earlier rejects of the same logs found in the catalog's `_rejects` files, all committed in the batch's snapshot.
 */
class CommittedDecoding extends SliceDecoding<DecodedFile> {
  private constructor(
    private readonly deps: CommitDeps,
    private readonly decode: BatchDecoding,
    private readonly lake: LakeState,
    private readonly workDir: string,
  ) {
    super({
      engine: deps.engine,
      network: decode.network as Network,
      datasets: decode.datasets,
      runId: decode.runId,
      ingestedAt: decode.ingestedAt,
      workDir: path.join(workDir, 'decoded'),
    });
  }

  /** The decoded tables' and `_rejects`' current rows are read first (the writers read them). */
  static async open(deps: CommitDeps, decode: BatchDecoding, shapes: readonly TableShape[]): Promise<CommittedDecoding> {
    // The decoding's own files (JavaScript-decoded rows, partitions another writer changed): this process's, gone after the commit.
    const workDir = await mkdtemp(path.join(tmpdir(), 'chainlake-decode-'));
    try {
      return new CommittedDecoding(deps, decode, await readLake(deps, deps.engine.conn, path.join(workDir, 'lake'), shapes), workDir);
    } catch (e) {
      await rm(workDir, { recursive: true, force: true });
      throw e;
    }
  }

  /** The snapshot the decoded tables' rows were read at. */
  get readAt(): number {
    return this.lake.snapshotId;
  }

  protected isFile(written: DecodedFile): boolean {
    return written.file !== null;
  }

  /** The decoded days' files written so far. */
  get written(): CopiedTableFile[] {
    return this.files.flatMap((f) => (f.file ? [f.file] : []));
  }

  protected target(): DecodedTarget<DecodedFile> {
    const { store } = this.deps;
    const { lake } = this;
    const network = this.decode.network;
    return {
      lake: (shape) => lake.partitionsOf(shape, network),
      shape: (declared) => mergeShape(declared, lake.table(declared.name)),
      write: async (writer, shape, day, select) => {
        const { table, columns } = lake.table(shape.name);
        return { table: shape.name, partition: day, file: await writePartition(writer, store, table, columns, shape, select, network, day) };
      },
      replacedRejects: async (conn, logs) => findReplacedRejects(conn, lake, network as Network, this.decode.datasets, logs),
    };
  }

  override async close(): Promise<void> {
    try {
      await super.close();
    } finally {
      await dropReplacedRejects(this.deps.engine.conn).catch(() => undefined);
      await rm(this.workDir, { recursive: true, force: true });
    }
  }
}

/** What a merge wrote for one table: new partition files, and the partitions ([network, value]) they replace. */
interface Merged {
  files: StagedFile[];
  replaced: string[][];
  /** The snapshot the partitions' rows were read at (-1: none read). */
  readAt: number;
}

/** More for one merge than its fragments: rows from the commit itself, a condition on the kept rows, partitions to rewrite, a derivation. */
interface MergeExtra {
  /** A relation of fresh rows (the shape's columns and STAGED_PARTITION), read with the fragments. */
  fresh?: string;
  /** A condition the partitions' current rows must meet to stay (a re-decoding's rejects: KEEP_REJECT). */
  keep?: string;
  /** Partitions merged though no fresh row reaches them (their rows that fail `keep` go). */
  partitions?: readonly string[];
  /** Rows derived from each merged slice (decoding event_logs). */
  derive?: SliceHook;
}

/**
 * Merges `fragments` (typed rows of one network, with the staged partition column) with the current rows of
 * the partitions they touch and writes each partition as a new file (stored, not yet committed).
 */
async function mergeFragments(
  deps: CommitDeps,
  declared: TableShape,
  network: string,
  fragments: readonly string[],
  replacing: readonly ScopeRange[],
  extra: MergeExtra = {},
): Promise<Merged> {
  const { engine, store } = deps;
  const files: StagedFile[] = [];
  const replaced: string[][] = [];
  let readAt = -1;
  if (fragments.length === 0 && replacing.length === 0 && !extra.fresh && !extra.partitions?.length) return { files, replaced, readAt };
  // Partitions another writer changed are written out there to be merged.
  const scratch = path.join(tmpdir(), `chainlake-merge-${randomUUID()}`);
  const conn = await engine.connect();
  const freshTable = ident('__chainlake_fresh');
  const copied: CopiedTableFile[] = [];
  try {
    await freshTableOf(conn, freshTable, declared, await Promise.all(fragments.map((f) => store.localCopy(f))), extra.fresh);
    const lake = await readLake(deps, conn, scratch, [declared], replacing.length > 0);
    readAt = lake.snapshotId;
    const { table, columns } = lake.table(declared.name);
    // Columns another writer added to the table are merged and written with their values.
    const shape = mergeShape(declared, lake.table(declared.name));
    const written = await mergeTable({
      engine,
      conn,
      shape,
      name: `${shape.name}_${network}`,
      fresh: freshTable,
      lake: lake.partitionsOf(shape, network),
      // A derived table (reconciliation) replaces nothing, and is no dataset of the registry.
      ...(replacing.length > 0 ? { def: getDataset(shape.name), replacing } : {}),
      ...(extra.partitions ? { partitions: extra.partitions } : {}),
      ...(extra.keep ? { keep: extra.keep } : {}),
      ...(deps.sliceRows === undefined ? {} : { sliceRows: deps.sliceRows }),
      ...(extra.derive ? { derive: extra.derive } : {}),
      write: async (writer, partition, merged) => {
        const file = await writePartition(writer, store, table, columns, shape, merged.select, network, partition);
        if (file) copied.push(file);
        return { file, partition };
      },
    });
    const staged = await storeFiles(conn, store, copied);
    for (const w of written) {
      if (w.file) files.push(staged.get(w.file)!);
      replaced.push([network, w.partition]);
    }
  } catch (error) {
    // A merge that failed half-way leaves files no commit names.
    await removeFiles(store, copied);
    throw error;
  } finally {
    await conn.run(`DROP TABLE IF EXISTS ${freshTable}`).catch(() => undefined);
    await rm(scratch, { recursive: true, force: true });
    conn.closeSync();
  }
  return { files, replaced, readAt };
}

/**
 * The merge's fresh rows as a temp table: the batch's fragments (`local`: their copies on this machine) read once,
 * and `fresh`. Each slice filtered them again, and the key checks of a slice twice more, and a fragment is a small
 * file whose opening costs more than its rows. A batch is bounded by the commit's row target (commitFetched), so it
 * is held in the engine (which spills to its temp folder). Unordered: the rows are reduced by key and sorted after.
 * Windows fetched again whose rows are all gone bring no fragment, yet their old rows must go: an empty table then.
 */
async function freshTableOf(conn: DuckDBConnection, table: string, shape: TableShape, local: readonly string[], fresh: string | undefined): Promise<void> {
  const sources = [...(local.length > 0 ? [`SELECT * FROM read_parquet(${literalList(local)}, union_by_name = true)`] : []), ...(fresh ? [fresh] : [])];
  await createUnorderedTempTable(conn, table, sources.length > 0 ? sources.map((q) => `(${q})`).join(' UNION ALL BY NAME ') : noFreshRows(shape));
}

async function writePartition(
  conn: DuckDBConnection,
  store: Store,
  table: LakeTable,
  columns: readonly LakeColumn[],
  shape: TableShape,
  select: string,
  network: string,
  partition: string,
): Promise<CopiedTableFile | null> {
  const values = { network, [shape.partition]: partition };
  // The one data-file writer of both modes: a column of the table the shape lacks stays, as NULL (mergeShape's have them).
  const rows = { sql: select, present: new Set(shape.columns.map((c) => c.name)), constants: values };
  return copyTableFile(conn, { dataPath: store.localDataPath, table, columns }, rows, values);
}

/** Lake files uploaded side by side at most (a directory store has nothing to upload). */
const UPLOADS_AT_ONCE = 4;

/**
 * The partition files a merge or a decoding wrote, measured together (measureTableFiles: one read of their footers,
 * where a read per file was one statement per partition) and then put in the store, each before any catalog
 * transaction names it; each as the catalog records it, by the file written. If one fails to upload, none stays.
 */
async function storeFiles(conn: DuckDBConnection, store: Store, copied: readonly CopiedTableFile[]): Promise<Map<CopiedTableFile, StagedFile>> {
  const files = await measureTableFiles(conn, copied);
  const limit = pLimit(UPLOADS_AT_ONCE);
  const uploads = await Promise.allSettled(files.map((f) => limit(() => store.putLakeFile(f.fullPath))));
  const failed = uploads.find((u) => u.status === 'rejected');
  if (failed) {
    await removeFiles(store, files);
    throw failed.reason;
  }
  return new Map(copied.map((c, i) => [c, files[i]!]));
}

/** Removes written files from the store and from this machine (those not uploaded yet too); one already gone is no error. */
async function removeFiles(store: Store, files: readonly { fullPath: string }[]): Promise<void> {
  await Promise.all(files.map((f) => store.remove(store.lakeLocation(f.fullPath)).catch(() => undefined)));
}
