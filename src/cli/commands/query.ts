import { StatementType, type DuckDBResultReader } from '@duckdb/node-api';
import type { CommandModule } from 'yargs';
import { LakePaths } from '../../load/paths.js';
import { NoLakeError, openLakeReader } from '../../load/reader.js';
import { CliError } from '../exit-codes.js';
import { renderRows, type TableFormat } from '../output.js';

interface Args {
  sql: string;
  lake: string;
  format: TableFormat;
}

/**
 * Statements a read-only catalog would still run, because they write files rather than the catalog (DuckDB's
 * READ_ONLY covers only the database): refused, so `query` cannot put a stray file into the lake or
 * anywhere else. Exporting a result goes through `--format csv|json` and a shell redirect.
 */
const FILE_WRITING: Partial<Record<number, string>> = {
  [StatementType.COPY]: 'COPY writes files; export a result with --format csv (or json) and a redirect instead',
  [StatementType.EXPORT]: 'EXPORT DATABASE writes files; export a result with --format csv (or json) and a redirect instead',
  [StatementType.COPY_DATABASE]: 'COPY FROM DATABASE writes a database',
  [StatementType.EXTENSION]: 'INSTALL downloads and writes an extension (chainlake needs only the built-in parquet and json)',
  [StatementType.UPDATE_EXTENSIONS]: 'UPDATE EXTENSIONS downloads and writes extensions',
};

/**
 * Runs SQL against the lake's catalog, opened read-only so a query can never change the lake's tables. The
 * reader waits out a commit in progress and always sees a committed state (see openLakeReader).
 */
export async function queryLake(lake: string, sql: string, format: TableFormat): Promise<string> {
  const paths = new LakePaths(lake);
  const reader = await openLakeReader(paths);
  try {
    // Statement by statement, so that one that writes files is refused before anything runs after it.
    if (sql.trim() === '') throw new CliError('no SQL statement given');
    const statements = await reader.conn.extractStatements(sql).catch((e: Error) => {
      throw new Error(e.message.replace(/^Failed to extract statements: /, ''));
    });
    if (statements.count === 0) throw new CliError('no SQL statement given');
    let result: DuckDBResultReader | undefined;
    for (let i = 0; i < statements.count; i++) {
      const prepared = await statements.prepare(i);
      const refused = FILE_WRITING[prepared.statementType];
      if (refused) throw new CliError(`query is read-only: ${refused}`);
      result = await prepared.runAndReadAll();
    }
    return renderRows(result!.columnNames(), result!.getRows(), format, format === 'json' ? result!.getRowObjectsJson() : undefined);
  } finally {
    reader.close();
  }
}

export const queryCommand: CommandModule<object, Args> = {
  command: 'query <sql>',
  describe: "Run SQL against the lake's catalog (read-only) and print the result",
  builder: (y) =>
    y
      .positional('sql', {
        type: 'string',
        demandOption: true,
        describe: 'SQL; every dataset is a view (e.g. transactions), plus _rejects, runs, windows, files, watermarks',
      })
      .option('lake', { type: 'string', default: 'data/lake', describe: 'Lake directory' })
      .option('format', {
        choices: ['table', 'csv', 'json'] as const,
        default: 'table' as const,
        describe: 'table: aligned, for a terminal; csv: RFC 4180 with a header; json: one object per line',
      })
      .example('$0 query "DESCRIBE transactions"', 'Columns and types of a dataset')
      .example('$0 query --format csv "SELECT block_date, count(*) FROM transactions GROUP BY ALL"', 'Rows per day as CSV')
      .example('$0 query "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = \'transactions\'"', 'What each column means')
      .example('$0 query --format json "SELECT * FROM _rejects LIMIT 5"', 'Rows that did not convert, as JSON lines') as never,
  handler: async (args) => {
    try {
      process.stdout.write((await queryLake(args.lake, args.sql, args.format)) + '\n');
    } catch (e) {
      if (e instanceof CliError || e instanceof NoLakeError) throw e;
      throw new CliError(`query failed: ${(e as Error).message}`);
    }
  },
};
