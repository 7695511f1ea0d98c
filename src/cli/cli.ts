// The command-line parser as a function: importing it has no side effects (no handlers on the process's
// streams, no environment changes, no runtime tuning), so tests run flags, help and usage errors in-process.
// main.ts is the bin that calls it.
import yargs from 'yargs';
import { chainlakeCodeOf } from '../errors.js';
import { COMMANDS, commandOf } from './command-registry.js';
import { CatalogDamagedError, isCatalogDamage } from '../load/catalog-damage.js';
import { CliError, exitCodeOfError } from './exit-codes.js';
import { DEFAULT_LAKE, LAKE_ENV } from './lake-target.js';
import { packageVersion, versionText } from './version.js';
import { withSuggestions } from './usage-hints.js';

/** A write to a pipe whose reader is gone (`chainlake query … | head`): not an error. */
export const closedPipe = (e: unknown): boolean => (e as NodeJS.ErrnoException | undefined)?.code === 'EPIPE';

/** Where the parser's own output (help, version) and an error's message go. */
export interface CliOutput {
  out(text: string): void;
  err(text: string): void;
}

/**
 * Parses `argv` (without node and the script) and runs the command it names. Help and version text go to
 * `output.out`; an error's message and hint to `output.err`. Returns the exit code the error decides, or
 * undefined when the command ended without one (a run sets its own, from its report).
 */
export async function runCli(argv: string[], output: CliOutput): Promise<number | undefined> {
  try {
    const text = await parse(argv);
    if (text) output.out(`${text}\n`);
    return undefined;
  } catch (e) {
    return reportError(e, argv, output);
  }
}

/** The help or version text yargs produced, if the line asked for it. */
async function parse(argv: string[]): Promise<string> {
  // One command when the line names one; all of them for the help, a mistyped command (yargs suggests the
  // nearest) or none; none for --version.
  const named = commandOf(argv);
  const loaders = named ? [COMMANDS[named]!] : argv.includes('--version') ? [] : Object.values(COMMANDS);
  const commands = await Promise.all(loaders.map((load) => load()));
  // The full text loads DuckDB and may ask git: only when it is printed.
  const version = argv.includes('--version') ? await versionText() : packageVersion();
  let cli = yargs(argv)
    .scriptName('chainlake')
    .usage('$0 <command> [options]\n\nExport a blockchain explorer API and a finance API into a typed Parquet lake that DuckDB queries.')
    .option('log-format', { choices: ['text', 'json'] as const, describe: 'Log lines as text or one JSON object per line' })
    .option('quiet', { type: 'boolean', alias: 'q', describe: 'Only warnings, errors and failures' })
    .option('verbose', { type: 'boolean', alias: 'v', describe: 'Per-window detail' });
  for (const command of commands) cli = cli.command(command);
  cli = cli
    .middleware((a) => {
      // What an unset variable gives (`--lake "$DIR"`): an empty path would put the lake in the working directory.
      if (typeof a.lake === 'string' && a.lake.trim() === '')
        throw new CliError(
          '--lake is empty (is the variable it was given unset?)',
          'CHAINLAKE_USAGE',
          `name the lake folder, e.g. --lake ${DEFAULT_LAKE}, or leave --lake out (the job's lake, else $${LAKE_ENV}, else ${DEFAULT_LAKE})`,
        );
    }, true)
    .completion('completion', 'Print a bash/zsh completion script (source it from ~/.bashrc or ~/.zshrc)')
    .demandCommand(1, 'Name a command (see --help).')
    .strict()
    .recommendCommands()
    .version(version)
    .help()
    .alias('help', 'h')
    .wrap(Math.min(110, process.stdout.columns || 100))
    .epilog(
      'Exit codes: 0 complete; 1 some windows failed (the next run catches up); 2 something to fix: a flag, the job file, a URL, ' +
        'CHAINLAKE_API_KEY, the lake or report path (the message names it); 3 rejects under --strict; 4 daily request quota reached; ' +
        '5 verify or reconcile found a difference, or catalog rebuild found the lake not whole (the output names it); ' +
        '75 lake locked by another run; 130 interrupted (Ctrl-C), 143 terminated (SIGTERM): the run is marked interrupted and the next run resumes it.',
    )
    .exitProcess(false)
    .fail((msg, err) => {
      if (err) throw err;
      // The options of the command being parsed (yargs' instance holds them while it parses; untyped).
      const flags = Object.keys((cli as unknown as { getOptions(): { key: Record<string, unknown> } }).getOptions().key);
      throw new CliError(`${withSuggestions(msg, flags, argv)}\nRun 'chainlake --help' for usage.`, 'CHAINLAKE_USAGE');
    });
  skipEagerHelp(cli, argv);
  let text = '';
  await cli.parseAsync(argv, {}, (_err, _args, out) => {
    text += out;
  });
  return text;
}

/**
 * yargs lays out a command's whole help text (cliui, wrap-ansi, string-width) each time the command runs, and
 * keeps it for a handler that may print it later; no handler here does, and failures go through our `fail`, so
 * that text was never used, and laying it out is a large part of a command's start (docs/performance.md, "Startup").
 * The Angular CLI skips it the same way (angular/angular-cli#34087). `--help` is untouched. If
 * a yargs release renames its internals, this does nothing and yargs behaves as before.
 */
function skipEagerHelp(cli: unknown, argv: readonly string[]): void {
  if (argv.includes('--help') || argv.includes('-h')) return;
  type Usage = { cacheHelpMessage?: () => void };
  const usage = (cli as { getInternalMethods?(): { getUsageInstance?(): Usage | undefined } }).getInternalMethods?.().getUsageInstance?.();
  if (typeof usage?.cacheHelpMessage === 'function') usage.cacheHelpMessage = () => undefined;
}

/** The `--lake` this command was given, to name it in a hint. */
function lakeArg(argv: string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i]!.startsWith('--lake=')) return argv[i]!.slice(7);
    if (argv[i] === '--lake' && i + 1 < argv.length) return argv[i + 1];
  }
  return undefined;
}

/** Writes what a person reads of an error (message, hint, the stack with --verbose) and returns its exit code. */
function reportError(e: unknown, argv: string[], output: CliOutput): number | undefined {
  // The error's code decides the exit code (the table in exit-codes.ts); anything else is unforeseen: exit 1,
  // and the message names what and where; the stack only helps us, so it needs --verbose.
  const verbose = argv.includes('--verbose') || argv.includes('-v');
  if (closedPipe(e)) return undefined;
  // Whichever command met it, a damaged catalog has one fix: say it. A reader names it where it opens the catalog
  // (load/read/reader.ts); DuckDB's refusal met anywhere else (a writer's catalog, a block read mid-query) carries
  // no code, only its words.
  if (chainlakeCodeOf(e) !== 'CHAINLAKE_CATALOG_DAMAGED' && (isCatalogDamage(e) || (e instanceof Error && isCatalogDamage(e.cause))))
    e = new CatalogDamagedError(isCatalogDamage(e) ? e : (e as Error).cause, lakeArg(argv));
  if (chainlakeCodeOf(e) !== undefined) {
    const c = e as Error & { hint?: string };
    output.err(`chainlake: ${c.message}\n${c.hint ? `  hint: ${c.hint}\n` : ''}${verbose && c.stack ? `${c.stack}\n` : ''}`);
  } else {
    output.err(`chainlake: ${verbose ? ((e as Error).stack ?? String(e)) : e instanceof Error ? e.message : String(e)}\n`);
  }
  return exitCodeOfError(e);
}
