#!/usr/bin/env node
// First: DuckDB's allocator reads its options when the library loads (see native-allocator.ts), and V8's
// young generation is kept small before the run allocates (see young-generation.ts).
import '../load/native-allocator.js';
import './young-generation.js';
import { readFileSync } from 'node:fs';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { LakeAccessError, LakeLockedError } from '../load/lock.js';
import { NoLakeError } from '../load/reader.js';
import { JobError } from '../pipeline/job.js';
import { describeCommand } from './commands/describe.js';
import { exportCommand } from './commands/export.js';
import { planCommand } from './commands/plan.js';
import { queryCommand } from './commands/query.js';
import { runCommand } from './commands/run.js';
import { scheduleCommand } from './commands/schedule.js';
import { schemaCommand } from './commands/schema.js';
import { verifyContractCommand } from './commands/verify-contract.js';
import { simulateCommand } from './commands/simulate.js';
import { statusCommand } from './commands/status.js';
import { compactCommand } from './commands/compact.js';
import { catalogCommand } from './commands/catalog.js';
import { decodeCommand } from './commands/decode.js';
import { CliError, EXIT } from './exit-codes.js';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

export async function main(argv: string[]): Promise<void> {
  const cli = yargs(argv)
    .scriptName('chainlake')
    .usage('$0 <command> [options]\n\nExport a blockchain explorer API and a finance API into a typed Parquet lake that DuckDB queries.')
    .option('log-format', { choices: ['text', 'json'] as const, describe: 'Log lines as text or one JSON object per line' })
    .option('quiet', { type: 'boolean', alias: 'q', describe: 'Only warnings, errors and failures' })
    .option('verbose', { type: 'boolean', alias: 'v', describe: 'Per-window detail' })
    .command(runCommand)
    .command(planCommand)
    .command(exportCommand)
    .command(queryCommand)
    .command(describeCommand)
    .command(simulateCommand)
    .command(statusCommand)
    .command(compactCommand)
    .command(catalogCommand)
    .command(decodeCommand)
    .command(scheduleCommand)
    .command(verifyContractCommand)
    .command(schemaCommand)
    .demandCommand(1, 'Name a command (see --help).')
    .strict()
    .recommendCommands()
    .version(pkg.version)
    .help()
    .alias('help', 'h')
    .wrap(Math.min(110, process.stdout.columns || 100))
    .epilog('Exit codes: 0 complete, 1 some windows failed (a re-run resumes), 2 usage or job-file error, 3 rejects under --strict, 75 lake locked.')
    .fail((msg, err) => {
      if (err) throw err;
      throw new CliError(`${msg}\nRun 'chainlake --help' for usage.`, EXIT.usage);
    });
  await cli.parseAsync();
}

main(hideBin(process.argv)).catch((e: unknown) => {
  if (e instanceof CliError) {
    process.stderr.write(`chainlake: ${e.message}\n`);
    process.exitCode = e.exitCode;
  } else if (e instanceof NoLakeError) {
    process.stderr.write(`chainlake: ${e.message}\n`);
    process.exitCode = EXIT.usage;
  } else if (e instanceof LakeAccessError) {
    process.stderr.write(`chainlake: ${e.message}\n`);
    process.exitCode = e.badPath ? EXIT.usage : EXIT.windowsFailed;
  } else if (e instanceof JobError) {
    // `export` builds its job from flags: there is no file to blame.
    process.stderr.write(
      e.file === 'command line' ? `chainlake: invalid arguments: ${e.where ? `${e.where}: ` : ''}${e.problem}\n` : `chainlake: job file error: ${e.message}\n`,
    );
    process.exitCode = EXIT.usage;
  } else if (e instanceof LakeLockedError) {
    process.stderr.write(`chainlake: ${e.message}\n`);
    process.exitCode = EXIT.locked;
  } else {
    // A run that could not start or finish (the API refused the key, the lake is unwritable...): the
    // message names what and where; the stack only helps us, so it needs --verbose.
    const verbose = process.argv.includes('--verbose') || process.argv.includes('-v');
    process.stderr.write(`chainlake: ${verbose ? ((e as Error).stack ?? String(e)) : e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = EXIT.windowsFailed;
  }
});
