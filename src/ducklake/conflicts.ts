/**
 * Optimistic concurrency between DuckLake writers, as the spec's own writers keep it: a commit that replaces a
 * table's rows (ends its partitions' files and inlined rows, writing the merge of what it read in their place) read
 * those rows at some snapshot; a later snapshot of another writer that changed the same table (rows inserted,
 * deleted, inlined, flushed, compacted, the table altered or dropped) would be undone by it. The catalog says which
 * tables each snapshot changed (`ducklake_snapshot_changes.changes_made`), so one statement tells, in the commit's
 * catalog transaction; and none while no snapshot came after the one read (the commit reads the newest anyway).
 */
import type { CatalogDb } from './catalog-db.js';
import { ChainlakeError } from '../errors.js';

/** A snapshot after the one a commit read that changed a table the commit replaces rows of. */
export interface LaterChange {
  readonly snapshotId: number;
  /** The commit's tables (by id) it changed. */
  readonly tableIds: readonly number[];
  /** Its `changes_made`, as the catalog records it. */
  readonly changes: string;
  readonly author: string | null;
}

/** `<kind>:<id>` entries of changes_made (ids of tables, views or schemas, one id space: next_catalog_id). */
const BY_ID = /(?:^|,)[a-z_]+:(\d+)(?=,|$)/g;

/**
 * The snapshots after `readAt` that changed one of `tableIds`, oldest first. Snapshot ids follow one another, so a
 * missing one was expired (with its changes) since: what it changed is unknown, and it counts as changing them all.
 */
export async function changesSince(db: CatalogDb, readAt: number, tableIds: readonly number[]): Promise<LaterChange[]> {
  if (tableIds.length === 0) return [];
  const wanted = new Set(tableIds);
  const rows = await db.query(
    `SELECT s.snapshot_id, c.changes_made, c.author FROM ducklake_snapshot s LEFT JOIN ducklake_snapshot_changes c ON c.snapshot_id = s.snapshot_id
     WHERE s.snapshot_id > $1 ORDER BY s.snapshot_id`,
    [readAt],
  );
  const out: LaterChange[] = [];
  let expected = readAt + 1;
  for (const r of rows) {
    const snapshotId = Number(r.snapshot_id);
    const author = r.author === null || r.author === undefined ? null : String(r.author);
    if (snapshotId !== expected || r.changes_made === null || r.changes_made === undefined) {
      out.push({ snapshotId, tableIds: [...wanted], changes: `snapshots ${expected} to ${snapshotId} expired or unrecorded since`, author });
    } else {
      const changes = String(r.changes_made);
      const ids = [...new Set([...changes.matchAll(BY_ID)].map((m) => Number(m[1])))].filter((id) => wanted.has(id));
      if (ids.length) out.push({ snapshotId, tableIds: ids, changes, author });
    }
    expected = snapshotId + 1;
  }
  return out;
}

/** Fails with LakeChangedError when a snapshot after `readAt` changed one of `tableIds` (see changesSince). */
export async function refuseChangesSince(db: CatalogDb, readAt: number, tableIds: readonly number[], names?: ReadonlyMap<number, string>): Promise<void> {
  const later = await changesSince(db, readAt, tableIds);
  if (later.length) throw new LakeChangedError(readAt, later, names);
}

/**
 * Another DuckLake writer committed to a table between a commit's read of it and its catalog transaction: the
 * commit did not happen (nothing of it is in the lake), and the other writer's rows are untouched. A committer
 * prepares again from the new state (a few times); this error ends the command when the other writer keeps
 * committing meanwhile.
 */
export class LakeChangedError extends ChainlakeError {
  constructor(
    readonly readAt: number,
    readonly later: readonly LaterChange[],
    private readonly names: ReadonlyMap<number, string> = new Map(),
    readonly attempts = 1,
    /** What the command fetched that no commit took, and so fetches again when run again (its caller knows it). */
    readonly refetched?: string,
  ) {
    const first = later[0]!;
    const tables = [...new Set(later.flatMap((c) => c.tableIds))].map((id) => names.get(id) ?? `table ${id}`).join(', ');
    super(
      `another DuckLake writer committed to ${tables} (snapshot ${first.snapshotId}${first.author ? ` by ${first.author}` : ''}: ${first.changes}${later.length > 1 ? `, and ${later.length - 1} more snapshots` : ''}) after chainlake read it at snapshot ${readAt}${attempts > 1 ? `, at each of ${attempts} attempts` : ''}: chainlake did not commit, so nothing of that writer's was undone and nothing was lost`,
      {
        code: 'CHAINLAKE_LAKE_CHANGED',
        hint: `run again once the other writer is idle: ${refetched ?? 'what was fetched and not committed is fetched again (a worker leaves it fetched for the next commit)'}`,
      },
    );
  }

  /** The same error, as the last of `attempts` attempts. */
  after(attempts: number): LakeChangedError {
    return new LakeChangedError(this.readAt, this.later, this.names, attempts, this.refetched);
  }

  /** The same error, its hint saying exactly what running again does (`refetched`: what a run fetches again; what a maintenance command does again). */
  fetchedAgain(refetched: string): LakeChangedError {
    return new LakeChangedError(this.readAt, this.later, this.names, this.attempts, refetched);
  }
}

/**
 * Times a commit is prepared when another DuckLake writer keeps changing its tables meanwhile: each attempt reads the
 * rows anew, so another writer's commit between two attempts is merged by the next one.
 */
export const COMMIT_ATTEMPTS = 3;

/**
 * Runs `attempt` (a commit's preparation and its catalog transaction) again while it fails with LakeChangedError, up to
 * COMMIT_ATTEMPTS times (then fails with the last, saying so); `again` hears each retry. The attempt cleans up after
 * itself: a commit that did not happen leaves no file of its own.
 */
export async function againIfLakeChanged<T>(attempt: (n: number) => Promise<T>, again: (error: LakeChangedError, next: number) => void): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (error) {
      if (!(error instanceof LakeChangedError)) throw error;
      if (n >= COMMIT_ATTEMPTS) throw error.after(n);
      again(error, n + 1);
    }
  }
}
