import { existsSync } from 'node:fs';
import { rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { CommandModule } from 'yargs';
import { lakeReportHtml } from '../../report/report.js';
import { CliError } from '../exit-codes.js';
import { describeTarget, resolveLakeTarget, withLakeOptions } from '../lake-target.js';

interface Args {
  lake?: string;
  catalog?: string;
  store?: string;
  output: string;
  force?: boolean;
}

export const DEFAULT_REPORT_FILE = 'chainlake-report.html';

export const reportCommand: CommandModule<object, Args> = {
  command: 'report',
  describe:
    'Write a lake (local, or with --catalog distributed) as one self-contained HTML page: coverage of each dataset and scope, runs, requests per day, rows per day, rejects, snapshots',
  builder: (y) =>
    withLakeOptions(y, { distributed: true })
      .option('output', { alias: 'o', type: 'string', default: DEFAULT_REPORT_FILE, describe: 'The HTML file to write; - for stdout' })
      .option('force', { type: 'boolean', describe: 'Overwrite the --output file if it exists' })
      .example('$0 report', `The lake $CHAINLAKE_LAKE or $CHAINLAKE_CATALOG names, else data/lake, into ${DEFAULT_REPORT_FILE}`)
      .example('$0 report --lake /srv/lake -o /tmp/lake.html --force', 'Another lake, into a file written over')
      .example('$0 report --catalog postgres://chainlake@db/lake -o - > lake.html', 'A distributed lake, to stdout'),
  handler: async (args) => {
    const toStdout = args.output === '-';
    // A page replaces nobody's file by accident, as `query --output` does.
    if (!toStdout && !args.force && existsSync(args.output))
      throw new CliError(`--output ${args.output} exists: not overwritten`, 'CHAINLAKE_USAGE', 'give --force to overwrite it, or name another file');
    const target = resolveLakeTarget(args);
    const html = await lakeReportHtml(target.kind === 'local' ? { kind: 'local', lake: target.lake } : target);
    if (toStdout) {
      process.stdout.write(html);
      return;
    }
    // Written beside its final name and renamed whole: a browser refreshing the page never reads half of it.
    const partial = path.join(path.dirname(args.output), `.${path.basename(args.output)}.partial`);
    try {
      await writeFile(partial, html);
      await rename(partial, args.output);
    } catch (e) {
      await rm(partial, { force: true });
      throw new CliError(`cannot write --output ${args.output}: ${(e as Error).message}`);
    }
    process.stderr.write(`wrote ${args.output}: the report of ${describeTarget(target)}\n`);
  },
};
