/**
 * A dataset's table another DuckLake writer dropped and created again under its name (`DROP TABLE t; CREATE TABLE t
 * …`, or one `CREATE OR REPLACE TABLE t AS …`): the catalog has a current row of the name, so the name alone says
 * the table is there, but it is another table (another table id) and the rows the ledger's claims counted went with
 * the dropped one. The one rule, for both kinds of lake, that planning (planning.ts voidClaims: the claims are void,
 * the whole range is fetched again) and the commit (load/write/dropped-tables.ts: a run planned before it refuses)
 * read.
 */
import { literal } from '../sql.js';
import type { Ledger } from './windows.js';
import { ledgerTableName } from './schema.js';

/** A table of the name whose claims went with a dropped table: the drop, its last readable snapshot, the new table's creation. */
export interface Replaced {
  /** The snapshot that dropped the table the claims were made on (the newest such drop before the current table). */
  dropped: number;
  /** The last snapshot kept that has the dropped table (its rows read there), if any. */
  readable?: number;
  /** The snapshot where the table of the name now took it (created under it, or renamed to it). */
  recreated: number;
  /** The table of the name now. */
  tableId: number;
  /**
   * A run's record says it voided the claims knowing of this drop (see replacedTables): the claims standing now were
   * made on the table of the name now. Only with `covered`.
   */
  covered?: true;
}

const num = (v: unknown): number | undefined => (v === null || v === undefined ? undefined : Number(v));

/**
 * Of `names`, the tables whose current catalog row is not the table the ledger's claims on it were made on: the
 * name's current table was created after another table of the name was dropped (an ended row of the name whose
 * table id has no current row: dropped, not renamed), and nothing says chainlake's claims were made since on the
 * new one. Two facts say so, and nothing else could, since watermarks and windows do not name a table id:
 *
 * - chainlake created the current table itself (its snapshot's author `chainlake`, message `create <name>`):
 *   it creates a dropped table only once no claim on it stands (load/write/lake-tables.ts ensureTable's `voided`;
 *   a distributed `catalog rebuild` deletes its marks with it), so every claim since was made on that table;
 * - a run's record says it voided the claims on the dataset knowing of that drop (`voided[].dropped` at or after it,
 *   in a local run's start record and report, a distributed run's `report`): it deleted the marks and queued the
 *   range again before any commit into the new table, so every claim since was made on it.
 *
 * Without either, the claims predate the drop (a run planned before it; or no run has planned since): void. So a
 * table created again by another writer is voided once, by the run that fetches its range again, and never again
 * for the same drop. With `covered`, those a run's record covers are returned too, marked `covered` (the commit checks
 * the shape of every table another writer made: dropped-tables.ts); with `records: false`, the runs' records are not
 * read (a catalog without the ledger beside it: none is `covered`). `lake`: the qualifier of the DuckLake tables beside the ledger ('' when unqualified). A lake
 * where no table of these names ended costs one plain query that returns nothing.
 */
export async function replacedTables(
  ledger: Ledger,
  lake: string,
  names: readonly string[],
  opts: { covered?: boolean; records?: false } = {},
): Promise<Map<string, Replaced>> {
  const out = new Map<string, Replaced>();
  if (names.length === 0) return out;
  const t = (name: string) => (lake ? `${lake}.${name}` : name);
  const list = names.map(literal).join(', ');
  // A name no table of which ever ended is the lake nobody dropped a table of: one plain scan says so, and the query
  // below, whose correlated subqueries every commit would pay, runs only on a lake where one was dropped
  // (docs/performance.md, "A run's fixed cost").
  if ((await ledger.db.query(`SELECT 1 FROM ${t('ducklake_table')} WHERE end_snapshot IS NOT NULL AND table_name IN (${list}) LIMIT 1`)).length === 0)
    return out;
  const rows = await ledger.db.query(
    `SELECT c.table_name, c.table_id, created, named, dropped,
            (SELECT max(p.snapshot_id) FROM ${t('ducklake_snapshot')} p JOIN ${t('ducklake_table')} e ON e.table_name = c.table_name AND e.end_snapshot = dropped
             WHERE p.snapshot_id >= e.begin_snapshot AND p.snapshot_id < e.end_snapshot) AS readable,
            (SELECT count(*) FROM ${t('ducklake_snapshot_changes')} h
             WHERE h.snapshot_id = created AND h.author = 'chainlake' AND h.commit_message = 'create ' || c.table_name) AS ours
     FROM (
       SELECT c.table_name, c.table_id,
              (SELECT min(f.begin_snapshot) FROM ${t('ducklake_table')} f WHERE f.table_id = c.table_id) AS created,
              (SELECT min(f.begin_snapshot) FROM ${t('ducklake_table')} f WHERE f.table_id = c.table_id AND f.table_name = c.table_name) AS named,
              (SELECT max(e.end_snapshot) FROM ${t('ducklake_table')} e
               WHERE e.table_name = c.table_name AND e.schema_id = c.schema_id AND e.table_id <> c.table_id AND e.end_snapshot IS NOT NULL
                 AND NOT EXISTS (SELECT 1 FROM ${t('ducklake_table')} n WHERE n.table_id = e.table_id AND n.end_snapshot IS NULL)) AS dropped
       FROM ${t('ducklake_table')} c JOIN ${t('ducklake_schema')} s ON s.schema_id = c.schema_id AND s.schema_name = 'main' AND s.end_snapshot IS NULL
       WHERE c.end_snapshot IS NULL AND c.table_name IN (${list})
         AND EXISTS (SELECT 1 FROM ${t('ducklake_table')} x WHERE x.table_name = c.table_name AND x.table_id <> c.table_id AND x.end_snapshot IS NOT NULL)
     ) c
     WHERE dropped IS NOT NULL`,
  );
  const candidates = rows.filter((r) => Number(r.ours) === 0);
  if (candidates.length === 0) return out;
  const covered = opts.records === false ? new Map<string, number>() : await voidRecords(ledger);
  for (const r of candidates) {
    const name = String(r.table_name);
    const dropped = Number(r.dropped);
    const known = (covered.get(name) ?? -1) >= dropped;
    if (known && !opts.covered) continue;
    const readable = num(r.readable);
    out.set(name, {
      dropped,
      ...(readable === undefined ? {} : { readable }),
      recreated: Number(r.named),
      tableId: Number(r.table_id),
      ...(known ? { covered: true as const } : {}),
    });
  }
  return out;
}

/**
 * Per dataset, the newest drop a run's record says it voided the claims for (`voided[].dropped`, both modes' runs).
 * Read only when a table of a claimed name was created again by another writer: the records are few, and each is
 * parsed here rather than by two engines' JSON functions.
 */
async function voidRecords(ledger: Ledger): Promise<Map<string, number>> {
  const rows = await ledger.db.query(
    `SELECT CAST(report AS VARCHAR) AS report FROM ${ledgerTableName(ledger.schema, 'runs')} WHERE CAST(report AS VARCHAR) LIKE '%"voided"%'`,
  );
  const out = new Map<string, number>();
  for (const r of rows) {
    const voided = (JSON.parse(String(r.report)) as { voided?: unknown }).voided;
    if (!Array.isArray(voided)) continue;
    for (const v of voided as { dataset?: unknown; dropped?: unknown }[]) {
      if (typeof v?.dataset !== 'string' || typeof v.dropped !== 'number') continue;
      out.set(v.dataset, Math.max(out.get(v.dataset) ?? -1, v.dropped));
    }
  }
  return out;
}
