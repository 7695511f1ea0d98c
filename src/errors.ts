/**
 * The stable codes of chainlake's errors, as undici's `UND_ERR_*`: a caller matches on `err.code`, which
 * survives a second copy of the package, a worker boundary or a JSON report, where `instanceof` does not.
 * The CLI maps each code to its exit number (src/cli/exit-codes.ts); this module is the bottom layer and
 * imports nothing.
 */
export const ERROR_CODES = [
  /** A failure the next run may well overcome (the default). */
  'CHAINLAKE_FAILED',
  /** Some windows of a run failed; what committed stays, and a re-run resumes. */
  'CHAINLAKE_WINDOWS_FAILED',
  /** The API answered with an error after the retries (5xx, timeouts, malformed pages). */
  'CHAINLAKE_API_ERROR',
  /** A window cannot be fetched as asked (a block over the result-window cap, a count that never settles). */
  'CHAINLAKE_WINDOW',
  /** A response does not have the shape the dataset declares. */
  'CHAINLAKE_SHAPE',
  /** A worker's lease on a window was taken over by another worker. */
  'CHAINLAKE_LEASE_LOST',
  /** A DuckLake catalog holds something chainlake does not read or write. */
  'CHAINLAKE_DUCKLAKE',
  /**
   * Another DuckLake writer renamed, dropped or retyped a table or column chainlake declares: refused before anything
   * is written, with the statement that undoes it.
   */
  'CHAINLAKE_SCHEMA_CHANGED',
  /** Something a person must fix: a bad flag, a missing URL, an unwritable path. */
  'CHAINLAKE_USAGE',
  /** A job file (or the job built from flags) is invalid. */
  'CHAINLAKE_JOB_INVALID',
  /** A dataset name this chainlake does not know. */
  'CHAINLAKE_UNKNOWN_DATASET',
  /** The API refused the key (HTTP 401/403). */
  'CHAINLAKE_API_REFUSED',
  /** Nothing answers at the API's address. */
  'CHAINLAKE_API_UNREACHABLE',
  /** No lake (no catalog) where one was named. */
  'CHAINLAKE_NO_LAKE',
  /** The lake's folder cannot be created or written. */
  'CHAINLAKE_LAKE_ACCESS',
  /** The lake's catalog.duckdb is damaged: `chainlake catalog rebuild` is the fix. */
  'CHAINLAKE_CATALOG_DAMAGED',
  /** A query the lake's reader refuses (one that writes files), SQL that does not parse, or SQL with no statement. */
  'CHAINLAKE_QUERY_REFUSED',
  /** DuckDB stopped a query as it ran (a value that does not cast, a division by zero). */
  'CHAINLAKE_QUERY_FAILED',
  /** A decode specification (the job's `decode` key, an ABI, an event signature) is invalid. */
  'CHAINLAKE_DECODE_SPEC',
  /** A value does not decode as its ABI type says. */
  'CHAINLAKE_DECODE_VALUE',
  /** The distributed control plane (PostgreSQL) refused or is unreachable. */
  'CHAINLAKE_CONTROL_PLANE',
  /** The shared store of a distributed lake cannot be used. */
  'CHAINLAKE_STORE',
  /** Rows did not convert and the run was strict. */
  'CHAINLAKE_STRICT_REJECTS',
  /** The job's daily request quota is spent for today (UTC). */
  'CHAINLAKE_QUOTA_REACHED',
  /** `chainlake verify` found the lake differing from the API or from itself (a count, a gap, a duplicate key). */
  'CHAINLAKE_VERIFY_DIFFERS',
  /** Another DuckLake writer kept committing to a table while chainlake prepared its commit of it: nothing was committed, nothing lost. */
  'CHAINLAKE_LAKE_CHANGED',
  /** Another run holds the lake's lock. */
  'CHAINLAKE_LOCKED',
  /** Stopped by SIGINT: the run is marked interrupted and the next run resumes it. */
  'CHAINLAKE_INTERRUPTED',
  /** Stopped by SIGTERM: as CHAINLAKE_INTERRUPTED. */
  'CHAINLAKE_TERMINATED',
] as const;

export type ChainlakeErrorCode = (typeof ERROR_CODES)[number];

const KNOWN: ReadonlySet<string> = new Set(ERROR_CODES);

/**
 * The codes of a window's failure that a person must fix (a refused key, a bad setting), which no re-run overcomes:
 * a run (or a worker) whose every window failed so exits 2, not 1.
 */
export const SETUP_CODES: ReadonlySet<ChainlakeErrorCode> = new Set(['CHAINLAKE_API_REFUSED', 'CHAINLAKE_USAGE', 'CHAINLAKE_JOB_INVALID']);

/** The chainlake code `e` carries, or undefined for anything else (a bug, a library's own error). */
export function chainlakeCodeOf(e: unknown): ChainlakeErrorCode | undefined {
  const code = (e as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && KNOWN.has(code) ? (code as ChainlakeErrorCode) : undefined;
}

export interface ChainlakeErrorOptions extends ErrorOptions {
  /** What kind of failure this is; the CLI's exit number follows from it. `CHAINLAKE_FAILED` unless told. */
  code?: ChainlakeErrorCode;
  /** What the user changes to fix it (a flag, a variable, a file, a command to run), printed under the message. */
  hint?: string;
}

/**
 * The base of every error chainlake raises on purpose: it carries a stable `code` and, where one exists, the
 * hint that names the fix. The CLI's entry point maps the code to the exit number; nothing else decides one.
 * Errors that are not ChainlakeErrors are bugs or unforeseen failures (exit 1, stack with --verbose).
 */
export class ChainlakeError extends Error {
  readonly code: ChainlakeErrorCode;
  readonly hint: string | undefined;

  constructor(message: string, opts: ChainlakeErrorOptions = {}) {
    super(message, opts.cause !== undefined ? { cause: opts.cause } : undefined);
    this.name = new.target.name;
    this.code = opts.code ?? 'CHAINLAKE_FAILED';
    this.hint = opts.hint;
  }
}

/**
 * A broken invariant of chainlake's own code (its dataset declarations, the order of its own calls): a plain Error,
 * not a ChainlakeError, since no job, flag, setting or answer of the API causes it and no code tells a caller what
 * to fix (exit 1, its stack with --verbose). Its message says so, the same way everywhere, for the report it deserves.
 */
export function bugError(message: string): Error {
  return new Error(`${message} (a bug in chainlake)`);
}

/** Edits (insert, delete, replace, swap of neighbours) that turn `a` into `b`. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The one of `known` that `given` is a typo of (case aside), or undefined when none is near enough: the "did
 * you mean" of every message that names a bad name (a job file's key or dataset, a command's dataset or column).
 */
export function nearestName(given: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const k of known) {
    const dist = editDistance(given.toLowerCase(), k.toLowerCase());
    if (dist < bestDistance) [best, bestDistance] = [k, dist];
  }
  return best !== undefined && bestDistance <= Math.max(1, Math.floor(best.length / 3)) ? best : undefined;
}
