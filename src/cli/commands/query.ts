import { createWriteStream, existsSync } from 'node:fs';
import { rename, rm, writeFile } from 'node:fs/promises';
import { once } from 'node:events';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { DuckDBResult, DuckDBValue } from '@duckdb/node-api';
import type { CommandModule } from 'yargs';
import { ByteRing } from '../../load/read/byte-ring.js';
import { LakePaths } from '../../load/paths.js';
import { lastQueryStatement, streamQuery } from '../../load/read/query.js';
import { openLakeReader, parseAsOf, type LakeReader } from '../../load/read/reader.js';
import { literal } from '../../load/sql.js';
import { GarbagePacer } from '../../pipeline/garbage.js';
import { CliError } from '../exit-codes.js';
import { chainlakeCodeOf } from '../../errors.js';
import { renderRows } from '../output.js';
import { resolveLakeTarget, withLakeOptions } from '../lake-target.js';
import { writeCsvRows } from './query-csv.js';
import { writeJsonRows } from './query-json.js';
import { openLakeTables } from '../../lake/open.js';

export type QueryFormat = 'table' | 'csv' | 'json' | 'parquet' | 'arrow';

interface Args {
  sql: string;
  lake?: string;
  catalog?: string;
  store?: string;
  'as-of'?: string;
  format?: QueryFormat;
  output?: string;
  force?: boolean;
}

/** The format a file's extension names, for `--output FILE` without `--format`. */
const FORMAT_OF_EXTENSION: Readonly<Record<string, QueryFormat>> = {
  '.csv': 'csv',
  '.json': 'json',
  '.jsonl': 'json',
  '.ndjson': 'json',
  '.parquet': 'parquet',
  '.arrow': 'arrow',
  '.arrows': 'arrow',
  '.ipc': 'arrow',
};

/** `--format` when given, else what `--output`'s extension says, else a table. */
export function queryFormatOf(format: QueryFormat | undefined, output: string | undefined): QueryFormat {
  if (format !== undefined) return format;
  return (output !== undefined ? FORMAT_OF_EXTENSION[path.extname(output).toLowerCase()] : undefined) ?? 'table';
}

/**
 * Rows a table shows at most: it must see all its rows to align them, so a larger result shows its first rows
 * and a count of the rest (read and counted, not kept); csv, json, arrow and parquet stream any size.
 */
export const TABLE_MAX_ROWS = 1_000;

/**
 * Bytes of output between two collections (see Out): a chunk that outlives a young-generation collection holds
 * its fixed buffers until then: the longer the interval, the more a long result grows the process
 * (docs/performance.md, "Query results").
 */
export const QUERY_GARBAGE_EVERY_BYTES = 16 * 1024 * 1024;

/** A sink that respects backpressure: a slow reader of stdout (or disk) slows the query instead of filling memory. */
class Out {
  /** Set once the reader went away (a closed pipe: `| head`): the rest is not wanted, and that is no error. */
  closed = false;
  private failure: Error | undefined;
  /**
   * DuckDB's chunks live in native memory behind small JavaScript objects, so V8 sees little reason to collect
   * them: where the CLI's runtime tuning installs a collector, a collection runs after every so many bytes
   * written (docs/performance.md, "Query results").
   */
  private readonly garbage = new GarbagePacer(QUERY_GARBAGE_EVERY_BYTES);
  constructor(private readonly stream: Writable) {
    stream.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EPIPE') this.closed = true;
      else this.failure ??= e;
    });
  }
  /** Throws what the stream reported (a full disk…) since the last write. */
  check(): void {
    if (this.failure) throw this.failure;
  }
  async write(s: string | Uint8Array): Promise<void> {
    this.check();
    if (this.closed) return;
    this.garbage.add(s.length);
    if (!this.stream.write(s)) await this.drained();
  }
  /**
   * Writes bytes whose buffer the caller will use again (a ByteRing's): resolves once the stream is done with
   * them, written or failed (the failure is then thrown by the next check or write).
   */
  consume(bytes: Uint8Array): Promise<void> {
    if (this.failure || this.closed) return Promise.resolve();
    this.garbage.add(bytes.length);
    return new Promise((resolve) => this.stream.write(bytes, () => resolve()));
  }
  private drained(): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        this.stream.off('drain', done).off('close', done).off('error', done);
        resolve();
      };
      this.stream.on('drain', done).on('close', done).on('error', done);
    });
  }
}

/** CSV, written through a ByteRing (query-csv.ts). */
async function writeCsv(result: DuckDBResult, out: Out): Promise<void> {
  await writeCsvRows(result, new ByteRing((bytes) => out.consume(bytes)), () => out.closed);
}

/** JSON lines, written through a ByteRing (query-json.ts). */
async function writeJson(result: DuckDBResult, out: Out): Promise<void> {
  await writeJsonRows(result, new ByteRing((bytes) => out.consume(bytes)), () => {
    out.check();
    return out.closed;
  });
}

/** An Arrow IPC stream (what pyarrow.ipc.open_stream, pandas and Polars read), batch by batch. */
async function writeArrow(result: DuckDBResult, out: Out): Promise<void> {
  // Loaded for this format only: apache-arrow costs the other formats' start-up a third of a second of CPU.
  const { writeArrowStream } = await import('../../load/read/arrow-ipc.js');
  await writeArrowStream(
    result,
    (bytes) => out.consume(bytes),
    () => {
      out.check();
      return out.closed;
    },
  );
}

async function writeTable(result: DuckDBResult, out: Out): Promise<void> {
  const kept: DuckDBValue[][] = [];
  let total = 0;
  for await (const rows of result.yieldRows()) {
    for (const r of rows) if (kept.length < TABLE_MAX_ROWS) kept.push(r);
    total += rows.length;
  }
  let text = renderRows(result.columnNames(), kept, 'table');
  if (total > kept.length) {
    text = text.replace(
      /\(\d+ rows?\)$/,
      `(${total} rows; the first ${kept.length} shown: use --format csv, json, arrow or parquet, with --output FILE, for all)`,
    );
  }
  await out.write(text + '\n');
}

/** `--format parquet`: DuckDB writes the query's result to the file itself (COPY), streaming, compressed. */
async function writeParquet(reader: Pick<LakeReader, 'conn'>, sql: string, file: string): Promise<void> {
  const split = await lastQueryStatement(reader.conn, sql);
  if (!split) throw new CliError('--format parquet writes the result of a query: the last statement must be a SELECT (or WITH, VALUES, FROM…)');
  for (const s of split.before) await reader.conn.run(s);
  await reader.conn.run(`COPY (${split.last}) TO ${literal(file)} (FORMAT parquet, COMPRESSION zstd)`);
}

/**
 * Runs SQL against the lake's catalog, opened read-only so a query can never change the lake's tables, and
 * writes the last statement's result to `out` as it is read: memory stays the same whatever the result's size.
 * The reader waits out a commit in progress and always sees a committed state (see openLakeReader).
 */
export async function queryLakeTo(
  lake: string | (() => Promise<LakeReader>),
  sql: string,
  format: QueryFormat,
  target: { stream: Writable } | { file: string },
): Promise<{ movedFrom?: string }> {
  const reader = typeof lake === 'string' ? await openLakeReader(new LakePaths(lake)) : await lake();
  try {
    if (format === 'parquet') {
      if (!('file' in target)) throw new CliError('--format parquet needs --output FILE (Parquet is a file format, not a stream)');
      await writeParquet(reader, sql, target.file);
      return { movedFrom: reader.movedFrom };
    }
    const result = await streamQuery(reader.conn, sql);
    // Created now, so that a path that cannot be written fails before the query runs.
    if ('file' in target) await writeFile(target.file, '');
    const stream = 'file' in target ? createWriteStream(target.file) : target.stream;
    const out = new Out(stream);
    try {
      if (format === 'csv') await writeCsv(result, out);
      else if (format === 'json') await writeJson(result, out);
      else if (format === 'arrow') await writeArrow(result, out);
      else await writeTable(result, out);
    } finally {
      if ('file' in target) {
        stream.end();
        await once(stream, 'close');
      }
      out.check();
    }
    return { movedFrom: reader.movedFrom };
  } finally {
    reader.close();
  }
}

/** The result as text (tests, small results): queryLakeTo into a string. */
export async function queryLake(lake: string, sql: string, format: Exclude<QueryFormat, 'parquet' | 'arrow'>): Promise<string> {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  await queryLakeTo(lake, sql, format, { stream });
  return text.replace(/\n$/, '');
}

export const queryCommand: CommandModule<object, Args> = {
  command: 'query <sql>',
  describe: "Run SQL against the lake's catalog (read-only) and print or write the result",
  builder: (y) =>
    withLakeOptions(
      y.positional('sql', {
        type: 'string',
        demandOption: true,
        describe:
          'SQL; every dataset is a view (e.g. transactions), plus _rejects, runs, windows, requests, files, watermarks and the ducklake_* tables (ducklake_snapshot…), on either kind of lake',
      }),
      { distributed: true },
    )
      .option('format', {
        choices: ['table', 'csv', 'json', 'parquet', 'arrow'] as const,
        defaultDescription: "--output's extension (.csv, .json/.jsonl/.ndjson, .parquet, .arrow/.arrows/.ipc), else table",
        describe: `table: aligned, for a terminal (the first ${TABLE_MAX_ROWS} rows); csv: RFC 4180 with a header; json: one object per line; arrow: an Arrow IPC stream (pandas, Polars, pyarrow); parquet: a Parquet file (needs --output)`,
      })
      .option('output', {
        type: 'string',
        alias: 'o',
        describe: 'Write the result to this file instead of stdout (streamed: any size); its extension chooses the format unless --format says',
      })
      .option('force', { type: 'boolean', describe: 'Overwrite the --output file if it exists' })
      .option('as-of', {
        type: 'string',
        describe: 'Read an earlier snapshot of the lake, by id (12) or time (2026-11-24T06:00:00Z); `SELECT * FROM ducklake_snapshot` lists them',
      })
      .example('$0 query "DESCRIBE transactions"', 'Columns and types of a dataset')
      .example('$0 query --format csv "SELECT block_date, count(*) FROM transactions GROUP BY ALL"', 'Rows per day as CSV')
      .example('$0 query --format parquet -o tx.parquet "SELECT * FROM transactions"', 'A whole dataset into one Parquet file')
      .example('$0 query --format arrow -o tx.arrows "SELECT * FROM transactions"', 'An Arrow stream: pyarrow.ipc.open_stream("tx.arrows").read_pandas()')
      .example('$0 query "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = \'transactions\'"', 'What each column means')
      .example('$0 query --format json "SELECT * FROM _rejects LIMIT 5"', 'Rows that did not convert, as JSON lines'),
  handler: async (args) => {
    // A result replaces nobody's file by accident: an hour's query into last week's export asks first.
    if (args.output !== undefined && !args.force && existsSync(args.output))
      throw new CliError(`--output ${args.output} exists: not overwritten`, 'CHAINLAKE_USAGE', 'give --force to overwrite it, or name another file');
    const format = queryFormatOf(args.format, args.output);
    // A file is written beside its final name and renamed once complete: a failed query leaves no half file.
    const partial = args.output ? path.join(path.dirname(args.output), `.${path.basename(args.output)}.partial`) : undefined;
    try {
      const asOf = parseAsOf(args['as-of']);
      const target = resolveLakeTarget(args);
      const source = () => openLakeTables(target, { asOf });
      const { movedFrom } = await queryLakeTo(source, args.sql, format, partial ? { file: partial } : { stream: process.stdout });
      if (partial) await rename(partial, args.output!);
      if (movedFrom && target.kind === 'local') {
        process.stderr.write(
          `chainlake: note: this lake was moved from ${movedFrom} and could not be updated here (read-only): it was read through temporary views of ${path.resolve(target.lake)}. Run any chainlake command (e.g. chainlake status) once with write access to update it for good.\n`,
        );
      }
    } catch (e) {
      if (partial) await rm(partial, { force: true });
      const failure = chainlakeCodeOf(e);
      if (failure === 'CHAINLAKE_QUERY_REFUSED' || failure === 'CHAINLAKE_QUERY_FAILED' || failure === 'CHAINLAKE_DUCKLAKE')
        throw new CliError(`query failed: ${(e as Error).message}`);
      if (failure !== undefined) throw e;
      const code = (e as NodeJS.ErrnoException).code;
      if (args.output && (code === 'ENOENT' || code === 'EACCES' || code === 'EROFS' || code === 'EISDIR')) {
        throw new CliError(`cannot write --output ${args.output}: ${(e as Error).message}`);
      }
      throw new CliError(`query failed: ${(e as Error).message}`);
    }
  },
};
