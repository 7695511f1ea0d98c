/**
 * The `block_times` ledger table: the block times a run asked of the block endpoint (src/pipeline/block-times.ts),
 * by run and block. The workers of a distributed run look a block up here before asking it and record what they
 * asked, so that the run asks each block once whichever workers fetch its windows. Keyed by run: a provisional
 * block's time may change with a reorg, so a time is never reused by another run. Defined once here, in the SQL
 * both DuckDB and PostgreSQL accept (src/ducklake/catalog-db.ts), and read and written through `CatalogDb`; the
 * control plane's setup creates it (distributed/control-plane.ts), and a run's rows are deleted in the transaction
 * that closes the run (distributed/runs.ts): no later run reads them. A single-machine run keeps the times it asked in
 * its own memory (one process runs every window) and writes no such table.
 */
import type { CatalogDb } from '../../ducklake/catalog-db.js';
import { ChainlakeError } from '../../errors.js';
import { ledgerTableName } from './schema.js';

export const BLOCK_TIMES_TABLE = 'block_times';

/** The table's name, under `schema` when one is given. */
export const blockTimesTable = (schema: string | undefined): string => ledgerTableName(schema, BLOCK_TIMES_TABLE);

/** The table's DDL; `schema` is the schema it lives in (none: the database's default). */
export function blockTimesLedgerDdl(schema?: string): string[] {
  // The time as text: exactly what the run converted from the block endpoint's answer, compared with the rows' times.
  return [
    `CREATE TABLE IF NOT EXISTS ${blockTimesTable(schema)} (run_id VARCHAR NOT NULL, block BIGINT NOT NULL, block_time VARCHAR NOT NULL, PRIMARY KEY (run_id, block))`,
  ];
}

/** How a book waits for a block another asker claimed: how often it looks, and how long before it asks itself. */
export interface ClaimWait {
  pollMs: number;
  /** An asker that claimed a block and stopped (killed, or its ask outlived this) holds no one up for longer. */
  maxMs: number;
}

/** A claimed block's time is usually recorded within one request's round trip: look often, give up after 10 s. */
export const CLAIM_WAIT: ClaimWait = { pollMs: 25, maxMs: 10_000 };

/** The `block_time` of a claimed block that no one has recorded yet: never a time (a time is ISO 8601, never empty). */
const CLAIMED = '';

/**
 * Where a run's asked block times are shared: what `blockTimes` looks a block up in before asking it, and records
 * its answer in. One asker asks a block: the first to claim it; another asker of the block waits for the time it
 * records. A block two askers asked anyway (a claim given up on) is recorded once: both then use the time recorded first.
 */
export interface BlockTimeBook {
  /** The time recorded for `block`, or undefined when the run has not asked it yet (or an asker is asking it). */
  find(block: number): Promise<string | undefined>;
  /**
   * Claims asking `block`: `{ claimed: true }` when this asker is to ask it and `record` (or `release`) it, or the
   * time recorded meanwhile by the asker that claimed it first (waited for, up to `wait.maxMs`; then this one asks
   * too: `{ claimed: true }`).
   */
  claim(block: number): Promise<{ claimed: true } | { claimed: false; time: string }>;
  /** Records the time asked for `block`, and returns the time the book holds for it (another asker's, recorded first). */
  record(block: number, time: string): Promise<string>;
  /** Gives back a claim whose ask failed, so that the next asker asks. */
  release(block: number): Promise<void>;
}

/** The block times of run `runId` in the ledger on `db` (the `block_times` table under `schema`). */
export function ledgerBlockTimes(db: CatalogDb, runId: string, schema?: string, wait: ClaimWait = CLAIM_WAIT): BlockTimeBook {
  const table = blockTimesTable(schema);
  /** What the book holds for `block`: a time, CLAIMED, or undefined (no row). */
  const held = async (block: number): Promise<string | undefined> => {
    const [row] = await db.query(`SELECT block_time FROM ${table} WHERE run_id = $1 AND block = $2`, [runId, block]);
    return row ? String(row.block_time) : undefined;
  };
  const gone = (block: number): ChainlakeError =>
    new ChainlakeError(
      `block ${block}: its time was recorded in ${schema ? `${schema}.` : ''}${BLOCK_TIMES_TABLE} for run ${runId} and cannot be read back: the run's times were deleted meanwhile (the run closed, or its rows removed)`,
      { code: 'CHAINLAKE_CONTROL_PLANE' },
    );
  return {
    async find(block) {
      const h = await held(block);
      return h === CLAIMED ? undefined : h;
    },
    async claim(block) {
      const giveUpAt = Date.now() + wait.maxMs;
      for (;;) {
        const inserted = await db.query(`INSERT INTO ${table} (run_id, block, block_time) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING block`, [
          runId,
          block,
          CLAIMED,
        ]);
        if (inserted.length > 0) return { claimed: true };
        const h = await held(block);
        if (h !== undefined && h !== CLAIMED) return { claimed: false, time: h };
        if (Date.now() >= giveUpAt) return { claimed: true };
        // Released (its asker failed) between the insert and the read: claim it again at once.
        if (h === undefined) continue;
        await new Promise((r) => setTimeout(r, wait.pollMs));
      }
    },
    async record(block, time) {
      // Over a claim (this asker's, or one given up on), never over a time: every window of the run uses the first.
      await db.query(
        `INSERT INTO ${table} (run_id, block, block_time) VALUES ($1, $2, $3) ON CONFLICT (run_id, block) DO UPDATE SET block_time = excluded.block_time WHERE ${table}.block_time = $4`,
        [runId, block, time, CLAIMED],
      );
      const h = await held(block);
      // Gone between this insert and its read: the run's rows were deleted meanwhile (the transaction that closes the
      // run, or by hand). The control plane no longer holds the run as this worker sees it: the window fails, coded.
      if (h === undefined || h === CLAIMED) throw gone(block);
      return h;
    },
    async release(block) {
      await db.query(`DELETE FROM ${table} WHERE run_id = $1 AND block = $2 AND block_time = $3`, [runId, block, CLAIMED]);
    },
  };
}
