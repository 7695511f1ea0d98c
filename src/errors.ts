export interface ChainlakeErrorOptions extends ErrorOptions {
  /** The process exit code when this error ends a command (see EXIT). */
  exitCode?: number;
  /** What the user changes to fix it (a flag, a variable, a file, a command to run), printed under the message. */
  hint?: string;
}

/**
 * The base of every error chainlake raises on purpose: it carries the exit code a command ends with and,
 * where one exists, the hint that names the fix. `main.ts` reads both; nothing else decides an exit code.
 * Errors that are not ChainlakeErrors are bugs or unforeseen failures (exit 1, stack with --verbose).
 */
export class ChainlakeError extends Error {
  readonly exitCode: number;
  readonly hint: string | undefined;

  constructor(message: string, opts: ChainlakeErrorOptions = {}) {
    super(message, opts.cause !== undefined ? { cause: opts.cause } : undefined);
    this.name = new.target.name;
    // 1 (EXIT.windowsFailed): the next run may well succeed. Literal, so this module imports nothing.
    this.exitCode = opts.exitCode ?? 1;
    this.hint = opts.hint;
  }
}
