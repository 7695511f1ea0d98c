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
 * Runs SQL against the lake's catalog, opened read-only so a query can never change the lake's tables. The
 * reader waits out a commit in progress and always sees a committed state (see openLakeReader).
 */
export async function queryLake(lake: string, sql: string, format: TableFormat): Promise<string> {
  const paths = new LakePaths(lake);
  const reader = await openLakeReader(paths);
  try {
    const result = await reader.conn.runAndReadAll(sql);
    return renderRows(result.columnNames(), result.getRows(), format, format === 'json' ? result.getRowObjectsJson() : undefined);
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
