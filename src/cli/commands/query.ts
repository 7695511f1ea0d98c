import { existsSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';
import type { CommandModule } from 'yargs';
import { LakePaths } from '../../load/paths.js';
import { CliError } from '../exit-codes.js';
import { renderRows, type TableFormat } from '../output.js';

interface Args {
  sql: string;
  lake: string;
  format: TableFormat;
}

/** Runs SQL against the lake's catalog, opened read-only so a query can never change the lake. */
export async function queryLake(lake: string, sql: string, format: TableFormat): Promise<string> {
  const paths = new LakePaths(lake);
  if (!existsSync(paths.catalog)) throw new CliError(`no lake at ${paths.root}: ${paths.catalog} does not exist (run a job first)`);
  const instance = await DuckDBInstance.create(paths.catalog, { access_mode: 'READ_ONLY', autoinstall_known_extensions: 'false' });
  try {
    const conn = await instance.connect();
    try {
      await conn.run("SET TimeZone = 'UTC'");
      const reader = await conn.runAndReadAll(sql);
      return renderRows(reader.columnNames(), reader.getRows(), format, format === 'json' ? reader.getRowObjectsJson() : undefined);
    } finally {
      conn.closeSync();
    }
  } finally {
    instance.closeSync();
  }
}

export const queryCommand: CommandModule<object, Args> = {
  command: 'query <sql>',
  describe: "Run SQL against the lake's catalog (read-only) and print the result",
  builder: (y) =>
    y
      .positional('sql', { type: 'string', demandOption: true, describe: 'SQL; every dataset is a view (e.g. transactions)' })
      .option('lake', { type: 'string', default: 'data/lake', describe: 'Lake directory' })
      .option('format', { choices: ['table', 'csv', 'json'] as const, default: 'table' as const, describe: 'Output format' })
      .example('$0 query "DESCRIBE transactions"', 'Columns and types of a dataset')
      .example('$0 query --format csv "SELECT block_date, count(*) FROM transactions GROUP BY ALL"', 'Rows per day as CSV') as never,
  handler: async (args) => {
    try {
      process.stdout.write((await queryLake(args.lake, args.sql, args.format)) + '\n');
    } catch (e) {
      if (e instanceof CliError) throw e;
      throw new CliError(`query failed: ${(e as Error).message}`);
    }
  },
};
