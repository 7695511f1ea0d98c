/**
 * The catalog database behind a DuckLake: a DuckDB file on one machine, PostgreSQL in distributed mode.
 *
 * Every catalog statement of this module is written once, in the SQL both engines accept: `$1`-style positional
 * parameters, `NOW()`, `CAST(x AS T)`, `||`, `COALESCE`, no `::`, no DuckDB-only functions. Values that differ
 * between engines (UUIDs, timestamps of `as-of`) are made in TypeScript and passed as parameters. `dialect` exists for
 * the few places that still need a switch (none in the statements of this module today; see docs/distributed.md).
 */
import { ChainlakeError } from '../errors.js';
import type { DuckDBConnection, DuckDBType, DuckDBValue } from '@duckdb/node-api';
import { BIGINT, BOOLEAN, DOUBLE, LIST, listValue, VARCHAR } from './node-api.js';

export type Dialect = 'duckdb' | 'postgres';

/** A catalog value as this module sees it: ids as numbers, text, booleans, timestamps as Date, NULL as null. */
export type CatalogValue = number | string | boolean | Date | null;
/** A statement's parameter: a value, or a list of values (bound as an array: `unnest(CAST($1 AS BIGINT[]))`). */
export type CatalogParam = CatalogValue | readonly CatalogValue[];
export type CatalogRow = Record<string, CatalogValue>;

export interface CatalogDb {
  readonly dialect: Dialect;
  /** Runs one statement and returns its rows. */
  query(sql: string, params?: readonly CatalogParam[]): Promise<CatalogRow[]>;
  /**
   * Runs `fn` in one catalog transaction: committed when it resolves, rolled back when it throws. Nested calls
   * join the outer transaction.
   */
  transaction<T>(fn: (tx: CatalogDb) => Promise<T>): Promise<T>;
}

/** Thrown when a catalog holds something this module does not read or write (names what and where). */
export class DuckLakeError extends ChainlakeError {
  constructor(message: string) {
    super(message, { code: 'CHAINLAKE_DUCKLAKE' });
  }
}

function toDuckDbParam(value: CatalogParam): DuckDBValue {
  if (Array.isArray(value)) return listValue((value as readonly CatalogValue[]).map(toDuckDbParam));
  if (typeof value === 'number' && Number.isInteger(value)) return BigInt(value);
  if (value instanceof Date) return value.toISOString();
  return value as DuckDBValue;
}

function elementType(values: readonly CatalogValue[]): DuckDBType {
  const first = values.find((v) => v !== null);
  if (typeof first === 'number') return values.every((v) => v === null || Number.isInteger(v)) ? BIGINT : DOUBLE;
  if (typeof first === 'boolean') return BOOLEAN;
  return VARCHAR;
}

/** Runs one statement on a DuckDB connection with catalog parameters, and reads its rows as catalog values. */
export async function duckDbQuery(connection: DuckDBConnection, sql: string, params: readonly CatalogParam[]): Promise<CatalogRow[]> {
  // A schema statement has no rows; DuckDB still answers some (CREATE … IF NOT EXISTS of what exists) with a `Count`
  // of an undefined value, which is not read.
  if (params.length === 0 && /^\s*(CREATE|ALTER|DROP|COMMENT)\b/i.test(sql)) {
    await connection.run(sql);
    return [];
  }
  // A list's element type is inferred from its first element by the driver: a list starting with NULL would bind
  // as a list of NULLs, so lists get their type from their first non-NULL value.
  const types = params.some(Array.isArray)
    ? params.map((p) => (Array.isArray(p) ? LIST(elementType(p as readonly CatalogValue[])) : elementType([p as CatalogValue])))
    : undefined;
  const reader = await connection.runAndReadAll(sql, params.length ? params.map(toDuckDbParam) : undefined, types);
  const names = reader.columnNames();
  const rows: CatalogRow[] = [];
  for (const raw of reader.getRowObjectsJS()) {
    const row: CatalogRow = {};
    for (const name of names) row[name] = fromDuckDb(raw[name], name);
    rows.push(row);
  }
  return rows;
}

function fromDuckDb(value: unknown, column: string): CatalogValue {
  if (value === null || value === undefined) return null;
  if (typeof value === 'bigint') {
    if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
      throw new DuckLakeError(`catalog column ${column}: ${value} is beyond the integers this module handles exactly`);
    }
    return Number(value);
  }
  if (typeof value === 'number' || typeof value === 'string' || typeof value === 'boolean' || value instanceof Date) return value;
  // UUIDs, decimals and the like arrive as DuckDB value objects: their text form is the catalog's text form.
  return String(value);
}

/**
 * A catalog on one connection, whatever the database: one connection runs one transaction at a time, so calls
 * are queued and a transaction is never interleaved with another statement on the same connection (concurrent
 * work needs separate connections). A subclass says how a statement runs and how its rows read.
 */
export abstract class SerialCatalog implements CatalogDb {
  abstract readonly dialect: Dialect;
  private queue: Promise<unknown> = Promise.resolve();

  /** Runs one statement on the connection, now (the queue is the caller's business). */
  protected abstract exec(sql: string, params: readonly CatalogParam[]): Promise<CatalogRow[]>;

  query(sql: string, params: readonly CatalogParam[] = []): Promise<CatalogRow[]> {
    return this.serial(() => this.exec(sql, params));
  }

  transaction<T>(fn: (tx: CatalogDb) => Promise<T>): Promise<T> {
    return this.serial(async () => {
      await this.exec('BEGIN TRANSACTION', []);
      const tx: CatalogDb = {
        dialect: this.dialect,
        query: (sql, params = []) => this.exec(sql, params),
        transaction: (inner) => inner(tx),
      };
      try {
        const result = await fn(tx);
        await this.exec('COMMIT', []);
        return result;
      } catch (error) {
        // A failed COMMIT has already ended the transaction; ROLLBACK then reports "no transaction": ignore that.
        await this.exec('ROLLBACK', []).catch(() => undefined);
        throw error;
      }
    });
  }

  private serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }
}

/** A catalog in DuckDB (a `catalog.duckdb` file, or any attached DuckDB database that is the default catalog of `connection`). */
export class DuckDbCatalog extends SerialCatalog {
  readonly dialect: Dialect = 'duckdb';

  constructor(private readonly connection: DuckDBConnection) {
    super();
  }

  protected exec(sql: string, params: readonly CatalogParam[]): Promise<CatalogRow[]> {
    return duckDbQuery(this.connection, sql, params);
  }
}

/** True when `error` is a lost race with another committer (retry the whole catalog transaction). */
export function isCommitConflict(error: unknown): boolean {
  const text = error instanceof Error ? error.message : String(error);
  // DuckDB: "TransactionContext Error: ... Conflict on ..." / "duplicate key"; PostgreSQL: 23505, 40001, 40P01.
  return /conflict|duplicate key|unique constraint|could not serialize|deadlock detected/i.test(text);
}
