/**
 * The watermarks of the one ledger's `watermarks` (schema.ts), for both kinds of lake: one SQL text over a `Ledger`
 * (`catalog.duckdb` on one machine, the control plane's `chainlake` schema in distributed mode). A commit reads a
 * scope's mark, computes the new one (pipeline/committer.ts `advanceWatermark`) and raises it here in the transaction
 * that commits the windows below it. A mark is never lowered: two commits racing on one scope keep the higher.
 */
import type { BlockRange } from '../../extract/pager.js';
import type { Ledger } from './windows.js';
import { ledgerTableName } from './schema.js';

/** A scope's watermark: the highest block committed without a gap below it. */
export interface WatermarkRecord {
  network: string;
  dataset: string;
  scope: string;
  block: number;
}

const table = (l: Ledger): string => ledgerTableName(l.schema, 'watermarks');

/**
 * A scope's mark, or undefined when it has none. With `lock`, the row stays locked until the transaction ends (on
 * PostgreSQL, where committers on other machines could move it; one machine has one committer, the catalog's lock).
 */
export async function readWatermark(ledger: Ledger, key: Omit<WatermarkRecord, 'block'>, opts: { lock?: boolean } = {}): Promise<number | undefined> {
  const lock = opts.lock && ledger.db.dialect === 'postgres' ? ' FOR UPDATE' : '';
  const row = (
    await ledger.db.query(`SELECT block FROM ${table(ledger)} WHERE network = $1 AND dataset = $2 AND scope = $3${lock}`, [key.network, key.dataset, key.scope])
  )[0];
  return row ? Number(row.block) : undefined;
}

/** Raises each scope's mark to `block` (a lower one is kept), recording the run whose commit moved it. */
export async function raiseWatermarks(ledger: Ledger, runId: string, marks: readonly WatermarkRecord[]): Promise<void> {
  // One statement for a commit's marks (one per mark cost a round trip each), each scope once, at its highest:
  // one statement may not change a row twice.
  const highest = new Map<string, WatermarkRecord>();
  for (const m of marks) {
    const key = JSON.stringify([m.network, m.dataset, m.scope]);
    const had = highest.get(key);
    if (!had || m.block > had.block) highest.set(key, m);
  }
  if (highest.size === 0) return;
  const rows = [...highest.values()];
  await ledger.db.query(
    `INSERT INTO ${table(ledger)} (network, dataset, scope, block, run_id, updated_at)
     SELECT network, dataset, scope, block, $5, NOW() FROM (SELECT unnest(CAST($1 AS VARCHAR[])) AS network, unnest(CAST($2 AS VARCHAR[])) AS dataset,
       unnest(CAST($3 AS VARCHAR[])) AS scope, unnest(CAST($4 AS BIGINT[])) AS block) AS u
     ON CONFLICT (network, dataset, scope) DO UPDATE SET block = greatest(watermarks.block, EXCLUDED.block), run_id = EXCLUDED.run_id,
       updated_at = EXCLUDED.updated_at`,
    [rows.map((r) => r.network), rows.map((r) => r.dataset), rows.map((r) => r.scope), rows.map((r) => r.block), runId],
  );
}

/**
 * Whether the ledger claims nothing of `dataset` that a table another DuckLake writer dropped held: no mark on any
 * network (planning voided them, voidWatermarks, or nothing of it was committed yet), and no window a run still
 * running committed (a snapshot dataset has no mark; a window beyond a gap moves none). A running run's windows were
 * committed into the table as it was when the run was planned, or made again at its start: planning voids a dropped
 * table's claims before a run starts (a distributed run taken up, its committed windows queued again).
 */
export async function unclaimed(ledger: Ledger, dataset: string): Promise<boolean> {
  const windows = ledgerTableName(ledger.schema, 'windows');
  const runs = ledgerTableName(ledger.schema, 'runs');
  const claims = await ledger.db.query(
    `SELECT 1 FROM ${table(ledger)} WHERE dataset = $1
     UNION ALL
     SELECT 1 FROM ${windows} w JOIN ${runs} r ON r.run_id = w.run_id WHERE w.dataset = $1 AND w.status IN ('committed', 'provisional') AND r.status = 'running'
     LIMIT 1`,
    [dataset],
  );
  return claims.length === 0;
}

/**
 * Deletes every network's marks of `datasets`, whose claims planning found void (planning.ts voidClaims): in the
 * run's start (one machine) or enqueue's transaction, before the table is made again, after which nothing could tell
 * the marks were void. Their runs and windows stay, as history.
 */
export async function voidWatermarks(ledger: Ledger, datasets: readonly string[]): Promise<void> {
  if (datasets.length === 0) return;
  await ledger.db.query(`DELETE FROM ${table(ledger)} WHERE dataset IN (SELECT unnest(CAST($1 AS VARCHAR[])))`, [[...datasets]]);
}

/**
 * How far a watermark reaches through committed ranges: from `old` (or, without one, from a range starting at
 * or before `rangeStart`), through every range that begins at most one block past what is covered so far.
 * The mark never passes `final`, the run's last final block (see Window.final). Returns the new mark
 * (undefined: none yet) and the ranges still beyond a gap.
 */
export function advanceWatermark(
  old: number | undefined,
  rangeStart: number,
  ranges: readonly BlockRange[],
  final?: number,
): { mark: number | undefined; rest: BlockRange[] } {
  const sorted = [...ranges].sort((a, b) => a.from - b.from || a.to - b.to);
  let mark = old;
  for (const r of sorted) {
    const continues = mark === undefined ? r.from <= rangeStart : r.from <= mark + 1;
    if (!continues) break;
    mark = mark === undefined ? r.to : Math.max(mark, r.to);
  }
  // Never past the last final block: what lies above it is provisional, and the next run fetches it again. A
  // scope whose committed blocks are all provisional still gets a mark (below its first block): it was committed,
  // so the next run's windows replace its rows.
  if (final !== undefined && mark !== undefined && mark > final) mark = Math.max(final, old ?? rangeStart - 1);
  return { mark, rest: mark === undefined ? sorted : sorted.filter((r) => r.to > mark) };
}
