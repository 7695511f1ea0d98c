#!/usr/bin/env node
// First: the CLI's runtime tuning (DuckDB's allocator reads its options when the library loads; V8's young
// generation is kept small before the run allocates): see runtime-tuning.ts. CHAINLAKE_RUNTIME_TUNING=off disables it.
import './runtime-tuning.js';
import { readFileSync } from 'node:fs';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { ChainlakeError } from '../errors.js';
import { COMMANDS, commandOf } from './command-registry.js';
import { CatalogDamagedError, isCatalogDamage } from '../load/catalog-damage.js';
import { CliError, EXIT } from './exit-codes.js';
import { onCatalogWait } from '../load/catalog-wait.js';
import { catalogWaitNotice } from './catalog-wait-notice.js';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

/** `chainlake query … | head`: the reader has all it wants. Not an error: stop quietly, exit 0. */
const closedPipe = (e: unknown): boolean => (e as NodeJS.ErrnoException | undefined)?.code === 'EPIPE';
process.stdout.on('error', (e) => {
  if (!closedPipe(e)) throw e;
  process.exit(process.exitCode ?? EXIT.ok);
});
// Logs to a closed stderr (`2>&1 | head`) are dropped rather than crash a run that is still writing the lake.
process.stderr.on('error', (e) => {
  if (!closedPipe(e)) throw e;
});

// The AWS SDK warns on every process under Node 20 that it will need Node 22 from 2027 (the README says so
// once): a worker's log is not the place. A library user keeps the SDK's own behaviour.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

// A command that waits for catalog.duckdb (another process's session holds it) says so, once the wait lasts.
onCatalogWait((w) => process.stderr.write(catalogWaitNotice(w)));

export async function main(argv: string[]): Promise<void> {
  // One command when the line names one; all of them for the help, a mistyped command (yargs suggests the
  // nearest) or none; none for --version.
  const named = commandOf(argv);
  const loaders = named ? [COMMANDS[named]!] : argv.includes('--version') ? [] : Object.values(COMMANDS);
  const commands = await Promise.all(loaders.map((load) => load()));
  let cli = yargs(argv)
    .scriptName('chainlake')
    .usage('$0 <command> [options]\n\nExport a blockchain explorer API and a finance API into a typed Parquet lake that DuckDB queries.')
    .option('log-format', { choices: ['text', 'json'] as const, describe: 'Log lines as text or one JSON object per line' })
    .option('quiet', { type: 'boolean', alias: 'q', describe: 'Only warnings, errors and failures' })
    .option('verbose', { type: 'boolean', alias: 'v', describe: 'Per-window detail' });
  for (const command of commands) cli = cli.command(command);
  cli = cli
    .middleware((a) => {
      // What an unset variable gives (`--lake "$LAKE"`): an empty path would put the lake in the working directory.
      if (typeof a.lake === 'string' && a.lake.trim() === '')
        throw new CliError('--lake is empty (is $LAKE unset?): name the lake folder, e.g. --lake data/lake', EXIT.usage);
    }, true)
    .demandCommand(1, 'Name a command (see --help).')
    .strict()
    .recommendCommands()
    .version(pkg.version)
    .help()
    .alias('help', 'h')
    .wrap(Math.min(110, process.stdout.columns || 100))
    .epilog(
      'Exit codes: 0 complete; 1 some windows failed (the next run catches up); 2 something to fix: a flag, the job file, a URL, ' +
        'CHAINLAKE_API_KEY, the lake or report path (the message names it); 3 rejects under --strict; 4 daily request quota reached; ' +
        '75 lake locked by another run; 130 interrupted (Ctrl-C), 143 terminated (SIGTERM): the run is marked interrupted and the next run resumes it.',
    )
    .fail((msg, err) => {
      if (err) throw err;
      throw new CliError(`${msg}\nRun 'chainlake --help' for usage.`, EXIT.usage);
    });
  await cli.parseAsync();
}

/** The `--lake` this command was given, to name it in a hint. */
function lakeArg(): string | undefined {
  const argv = process.argv;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i]!.startsWith('--lake=')) return argv[i]!.slice(7);
    if (argv[i] === '--lake' && i + 1 < argv.length) return argv[i + 1];
  }
  return undefined;
}

main(hideBin(process.argv)).catch((e: unknown) => {
  // The error decides the exit code (ChainlakeError.exitCode); anything else is unforeseen: exit 1, and the
  // message names what and where; the stack only helps us, so it needs --verbose.
  const verbose = process.argv.includes('--verbose') || process.argv.includes('-v');
  if (closedPipe(e)) return;
  // Whichever command met it, a damaged catalog has one fix: say it.
  if (isCatalogDamage(e) || (e instanceof Error && isCatalogDamage(e.cause)))
    e = new CatalogDamagedError(isCatalogDamage(e) ? e : (e as Error).cause, lakeArg());
  if (e instanceof ChainlakeError) {
    process.stderr.write(`chainlake: ${e.message}\n${e.hint ? `  hint: ${e.hint}\n` : ''}${verbose && e.stack ? `${e.stack}\n` : ''}`);
    process.exitCode = e.exitCode;
  } else {
    process.stderr.write(`chainlake: ${verbose ? ((e as Error).stack ?? String(e)) : e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = EXIT.windowsFailed;
  }
});
