import { ChainlakeError } from '../../errors.js';
import type duckdb from '@duckdb/node-bindings';
import type { DuckDBConnection } from '@duckdb/node-api';
import { DuckDBDataChunk, DuckDBResult, StatementType } from '../../ducklake/node-api.js';

/**
 * Statements a read-only catalog would still run, because they write files rather than the catalog (DuckDB's
 * READ_ONLY covers only the database): refused, so a query cannot put a stray file into the lake or anywhere
 * else. A result goes to a file through `chainlake query --output` instead.
 */
const FILE_WRITING: Partial<Record<number, string>> = {
  [StatementType.COPY]: 'COPY writes files; write a result with --output FILE (--format parquet, csv, json or arrow) instead',
  [StatementType.EXPORT]: 'EXPORT DATABASE writes files; write a result with --output FILE instead',
  [StatementType.COPY_DATABASE]: 'COPY FROM DATABASE writes a database',
  [StatementType.EXTENSION]: 'INSTALL downloads and writes an extension (chainlake needs only the built-in parquet and json)',
  [StatementType.UPDATE_EXTENSIONS]: 'UPDATE EXTENSIONS downloads and writes extensions',
};

/**
 * A statement the lake's reader refuses to run, SQL that does not parse or names what the lake does not have (an
 * unknown table, column or function), or SQL with no statement.
 */
export class QueryRefusedError extends ChainlakeError {
  constructor(message: string, cause?: unknown) {
    super(message, { code: 'CHAINLAKE_QUERY_REFUSED', cause });
  }
}

/**
 * DuckDB stopped a query as it ran (a value that does not cast, a division by zero, a file it cannot read): DuckDB's
 * words, its error as `cause`.
 */
export class QueryFailedError extends ChainlakeError {
  constructor(message: string, cause: unknown) {
    super(message, { code: 'CHAINLAKE_QUERY_FAILED', cause });
  }
}

// A streamed result that ends only at its last row. @duckdb/node-api 1.5.5 ends a stream the same way whether the
// query finished or DuckDB stopped it (a value that does not cast, a file it cannot read): `duckdb_fetch_chunk` gives
// NULL for both and the binding does not expose `duckdb_result_error`. An error before DuckDB hands over the first
// rows is thrown; one later (past the rows it runs ahead, about 250,000 of a narrow query) was lost, and the reader
// took a cut result for a whole one. So the query gains one row after its own: `UNION ALL BY NAME` a row whose
// marker column is true. DuckDB runs a union's second part after the first whenever the result keeps its order
// (PhysicalUnion: the union pipeline depends on the first's), so that row comes last, and only if every row before
// it was produced. The marker column and row are hidden from every reader of the result.
/** The marker column's name: not a name a query of the lake gives a column. */
export const END_MARKER = '__chainlake_end_of_result';

/** `query` (one SELECT statement, without its `;`) followed by the end row. */
export const withEndRow = (query: string): string => `SELECT *, false AS "${END_MARKER}" FROM (\n${query}\n) UNION ALL BY NAME SELECT true AS "${END_MARKER}"`;

/** A chunk without the marker column (the readers of a chunk go by its columnCount). */
class WithoutMarker extends DuckDBDataChunk {
  override get columnCount(): number {
    return super.columnCount - 1;
  }
}

/** The result of `withEndRow(query)`, read as the query's own: its columns, its rows, and an error where it was cut. */
export class WholeStream extends DuckDBResult {
  private ended = false;

  constructor(result: DuckDBResult) {
    super((result as unknown as { result: duckdb.Result }).result);
  }

  override get columnCount(): number {
    return super.columnCount - 1;
  }

  override async fetchChunk(): Promise<DuckDBDataChunk | null> {
    if (this.ended) return null;
    const chunk = await super.fetchChunk();
    const rows = chunk?.rowCount ?? 0;
    if (!chunk || rows === 0) {
      this.ended = true;
      throw new QueryFailedError('the query stopped before its last row (DuckDB did not say why): its result is incomplete', undefined);
    }
    // Only the query's last row can be the end row, and the end row is the result's last.
    const marker = chunk.getColumnVector(super.columnCount - 1);
    if (marker.getItem(rows - 1) !== true) return new WithoutMarker(chunk.chunk);
    this.ended = true;
    // Read DuckDB's own end too: until then the query stays open, holding its database (and its file's lock).
    await super.fetchChunk();
    if (rows === 1) return null;
    chunk.rowCount = rows - 1;
    return new WithoutMarker(chunk.chunk);
  }
}

/** DuckDB names the kind of its errors first (`Conversion Error: …`); nothing of ours is worded so. */
const DUCKDB_ERROR = /^[A-Z][A-Za-z]*(?: [A-Z][A-Za-z]*)* Error: /;

/** A DuckDB error met while a query runs, as a QueryFailedError; anything else as it is. */
function queryFailure(e: unknown): unknown {
  return e instanceof Error && !(e instanceof ChainlakeError) && DUCKDB_ERROR.test(e.message) ? new QueryFailedError(e.message, e) : e;
}

/**
 * A statement's run. DuckDB runs a streamed result ahead of its reader as it starts it, so a value fails here, well
 * past the first chunk. (One that fails later ends the stream as if complete: @duckdb/node-api 1.5.5 does not expose
 * the stream's error, duckdb_result_error, so nothing here can see it.)
 */
async function running<T>(run: Promise<T>): Promise<T> {
  try {
    return await run;
  } catch (e) {
    throw queryFailure(e);
  }
}

/**
 * Statement `i` prepared. DuckDB names the kind of a preparation's failure first: a Binder or Catalog Error is the
 * query's own (a name the lake does not have), refused with DuckDB's words; anything else (the catalog's storage,
 * a connection) keeps its own error.
 */
async function prepare(statements: Awaited<ReturnType<DuckDBConnection['extractStatements']>>, i: number) {
  try {
    return await statements.prepare(i);
  } catch (e) {
    if (e instanceof Error && /^(Binder|Catalog) Error: /.test(e.message)) throw new QueryRefusedError(e.message, e);
    throw e;
  }
}

/** The statements of `sql`, prepared, with their types: one refused before any of them runs. */
async function prepareAll(conn: DuckDBConnection, sql: string) {
  if (sql.trim() === '') throw new QueryRefusedError('no SQL statement given');
  const statements = await conn.extractStatements(sql).catch((e: Error) => {
    throw new QueryRefusedError(e.message.replace(/^Failed to extract statements: /, ''));
  });
  if (statements.count === 0) throw new QueryRefusedError('no SQL statement given');
  return statements;
}

/**
 * Runs `sql` (one or more statements) and returns the last one's result as a stream: DuckDB hands it over
 * chunk by chunk (2,048 rows) as it is read, so a result of any size is never held whole. Statements that
 * would write files are refused, each before it runs.
 */
export async function streamQuery(conn: DuckDBConnection, sql: string): Promise<DuckDBResult> {
  const statements = await prepareAll(conn, sql);
  for (let i = 0; i < statements.count; i++) {
    const prepared = await prepare(statements, i);
    const refused = FILE_WRITING[prepared.statementType];
    if (refused) throw new QueryRefusedError(`query is read-only: ${refused}`);
    if (i < statements.count - 1) await running(prepared.run());
    else return (await wholeStream(conn, sql, statements.count, prepared)) ?? running(prepared.stream());
  }
  throw new QueryRefusedError('no SQL statement given');
}

/**
 * The last statement streamed with its end row (WholeStream), when it is a SELECT that reads the same as a
 * subquery: the same column names and types. Otherwise undefined, and it streams as it is (a statement of
 * another kind, a result with two columns of one name).
 */
async function wholeStream(conn: DuckDBConnection, sql: string, count: number, last: Awaited<ReturnType<typeof prepare>>): Promise<WholeStream | undefined> {
  if (last.statementType !== StatementType.SELECT) return undefined;
  const texts = splitStatements(sql);
  if (texts.length !== count) return undefined;
  const wrapped = await conn.prepare(withEndRow(texts[count - 1]!)).catch(() => undefined);
  if (!wrapped || wrapped.columnCount !== last.columnCount + 1) return undefined;
  for (let c = 0; c < last.columnCount; c++) {
    if (wrapped.columnName(c) !== last.columnName(c) || wrapped.columnType(c).toString() !== last.columnType(c).toString()) return undefined;
  }
  return new WholeStream(await running(wrapped.stream()));
}

/** The last statement of `sql`, when it is a SELECT-like query that COPY could write out; undefined otherwise. */
export async function lastQueryStatement(conn: DuckDBConnection, sql: string): Promise<{ before: string[]; last: string } | undefined> {
  const statements = await prepareAll(conn, sql);
  const texts = splitStatements(sql);
  if (texts.length !== statements.count) return undefined;
  for (let i = 0; i < statements.count; i++) {
    const prepared = await prepare(statements, i);
    const refused = FILE_WRITING[prepared.statementType];
    if (refused) throw new QueryRefusedError(`query is read-only: ${refused}`);
    if (i === statements.count - 1 && prepared.statementType !== StatementType.SELECT) return undefined;
  }
  return { before: texts.slice(0, -1), last: texts[texts.length - 1]! };
}

/**
 * Splits SQL into statements on semicolons outside quotes and comments (enough for the COPY of `--format
 * parquet`, which must embed the last statement; a mismatch with DuckDB's count falls back to streaming).
 */
export function splitStatements(sql: string): string[] {
  const out: string[] = [];
  let current = '';
  for (let i = 0; i < sql.length; i++) {
    const ch = sql[i]!;
    if (ch === "'" || ch === '"') {
      const end = sql.indexOf(ch, i + 1);
      const stop = end === -1 ? sql.length : end;
      current += sql.slice(i, stop + 1);
      i = stop;
    } else if (ch === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      i = end === -1 ? sql.length : end;
      current += '\n';
    } else if (ch === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      i = end === -1 ? sql.length : end + 1;
      current += ' ';
    } else if (ch === ';') {
      if (current.trim()) out.push(current.trim());
      current = '';
    } else current += ch;
  }
  if (current.trim()) out.push(current.trim());
  return out;
}
