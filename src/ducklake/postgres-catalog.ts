/**
 * A DuckLake catalog in PostgreSQL (distributed mode), on any client shaped like `pg`'s `Client` / `PoolClient`:
 * the module does not import `pg` itself, the caller brings the connection (and sets its `search_path` when the
 * catalog lives in a schema of its own). The statements are the same as on DuckDB (see catalog-db.ts).
 */
import type { CatalogParam, CatalogRow, CatalogValue, Dialect } from './catalog-db.js';
import { DuckLakeError, SerialCatalog } from './catalog-db.js';

/** The part of `pg.Client` this module uses. */
export interface PgClientLike {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[]; fields: { name: string; dataTypeID: number }[] }>;
}

// PostgreSQL type oids whose text form `pg` hands over as strings but which are numbers in the catalog.
const INT8 = 20;
const INT2 = 21;
const INT4 = 23;

function fromPg(value: unknown, typeId: number, column: string): CatalogValue {
  if (value === null || value === undefined) return null;
  if (typeId === INT8 || typeId === INT2 || typeId === INT4) {
    const n = Number(value);
    if (!Number.isSafeInteger(n)) throw new DuckLakeError(`catalog column ${column}: ${String(value)} is beyond the integers this module handles exactly`);
    return n;
  }
  if (typeof value === 'number' || typeof value === 'string' || typeof value === 'boolean' || value instanceof Date) return value;
  return String(value);
}

/** A DuckLake catalog in PostgreSQL (BEGIN TRANSACTION is PostgreSQL's BEGIN too). */
export class PostgresCatalog extends SerialCatalog {
  readonly dialect: Dialect = 'postgres';

  constructor(private readonly client: PgClientLike) {
    super();
  }

  protected async exec(sql: string, params: readonly CatalogParam[]): Promise<CatalogRow[]> {
    const result = await this.client.query(sql, params.length ? [...params] : undefined);
    return (result.rows ?? []).map((raw) => {
      const row: CatalogRow = {};
      for (const field of result.fields ?? []) row[field.name] = fromPg(raw[field.name], field.dataTypeID, field.name);
      return row;
    });
  }
}
