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

/**
 * Where a run's asked block times are shared: what `blockTimes` looks a block up in before asking it, and records
 * its answer in. A block two askers asked at once is recorded once: both then use the time recorded first.
 */
export interface BlockTimeBook {
  /** The time recorded for `block`, or undefined when the run has not asked it yet. */
  find(block: number): Promise<string | undefined>;
  /** Records the time asked for `block`, and returns the time the book holds for it (another asker's, recorded first). */
  record(block: number, time: string): Promise<string>;
}

/** The block times of run `runId` in the ledger on `db` (the `block_times` table under `schema`). */
export function ledgerBlockTimes(db: CatalogDb, runId: string, schema?: string): BlockTimeBook {
  const table = blockTimesTable(schema);
  const find = async (block: number): Promise<string | undefined> => {
    const [row] = await db.query(`SELECT block_time FROM ${table} WHERE run_id = $1 AND block = $2`, [runId, block]);
    return row ? String(row.block_time) : undefined;
  };
  return {
    find,
    async record(block, time) {
      await db.query(`INSERT INTO ${table} (run_id, block, block_time) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, [runId, block, time]);
      // The row just inserted, or the one another asker recorded first: every window of the run uses that one.
      const held = await find(block);
      // Gone between this insert and its read: the run's rows were deleted meanwhile (the transaction that closes the
      // run, or by hand). The control plane no longer holds the run as this worker sees it: the window fails, coded.
      if (held === undefined)
        throw new ChainlakeError(
          `block ${block}: its time was recorded in ${schema ? `${schema}.` : ''}${BLOCK_TIMES_TABLE} for run ${runId} and cannot be read back: the run's times were deleted meanwhile (the run closed, or its rows removed)`,
          { code: 'CHAINLAKE_CONTROL_PLANE' },
        );
      return held;
    },
  };
}
