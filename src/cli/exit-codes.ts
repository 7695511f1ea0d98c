import { ChainlakeError, chainlakeCodeOf, type ChainlakeErrorCode } from '../errors.js';

/** Exit codes (documented in the README and `chainlake --help`): scripts and schedulers act on them. */
export const EXIT = {
  ok: 0,
  /** Some windows failed; what committed stays, and a re-run resumes. */
  windowsFailed: 1,
  /** Something a person must fix: a bad flag or job file, a missing URL, a refused API key, an unwritable lake or report path. */
  usage: 2,
  /** Rows did not convert and the run was --strict. */
  strictRejects: 3,
  /** The job's dailyRequestQuota is spent for today (UTC): what the run fetched is committed; the next run resumes. */
  quotaReached: 4,
  /**
   * The lake disagrees with the API or with itself, and the output names where: `chainlake verify` (a window's
   * count, a gap, a duplicate key) or `chainlake reconcile` (a balance the API reports against what the lake's whole
   * history of the address implies), or `chainlake catalog rebuild --catalog` (files the catalog names that the store
   * lacks, a committed dataset without its table). One code for "what was checked does not hold", whichever check found it.
   */
  differs: 5,
  /** Another run holds the lake's lock (EX_TEMPFAIL). */
  locked: 75,
  /** Interrupted by Ctrl-C (128 + SIGINT); the run is marked `interrupted` and the next run resumes it. */
  interrupted: 130,
  /** Stopped by SIGTERM (128 + SIGTERM); as for `interrupted`. */
  terminated: 143,
} as const;

/**
 * The one table from an error's code to the number a command exits with. Every code has a row (the type
 * checks it), so a new code cannot reach a user without its exit number being decided here.
 */
export const EXIT_OF_CODE: Readonly<Record<ChainlakeErrorCode, number>> = {
  CHAINLAKE_FAILED: EXIT.windowsFailed,
  CHAINLAKE_WINDOWS_FAILED: EXIT.windowsFailed,
  CHAINLAKE_API_ERROR: EXIT.windowsFailed,
  CHAINLAKE_WINDOW: EXIT.windowsFailed,
  CHAINLAKE_SHAPE: EXIT.windowsFailed,
  CHAINLAKE_LEASE_LOST: EXIT.windowsFailed,
  CHAINLAKE_DUCKLAKE: EXIT.windowsFailed,
  CHAINLAKE_LAKE_CHANGED: EXIT.windowsFailed,
  CHAINLAKE_DECODE_VALUE: EXIT.windowsFailed,
  CHAINLAKE_USAGE: EXIT.usage,
  CHAINLAKE_JOB_INVALID: EXIT.usage,
  CHAINLAKE_UNKNOWN_DATASET: EXIT.usage,
  CHAINLAKE_API_REFUSED: EXIT.usage,
  CHAINLAKE_API_UNREACHABLE: EXIT.usage,
  CHAINLAKE_NO_LAKE: EXIT.usage,
  CHAINLAKE_LAKE_ACCESS: EXIT.usage,
  CHAINLAKE_CATALOG_DAMAGED: EXIT.usage,
  CHAINLAKE_SCHEMA_CHANGED: EXIT.usage,
  CHAINLAKE_QUERY_REFUSED: EXIT.usage,
  CHAINLAKE_QUERY_FAILED: EXIT.usage,
  CHAINLAKE_DECODE_SPEC: EXIT.usage,
  CHAINLAKE_CONTROL_PLANE: EXIT.usage,
  CHAINLAKE_STORE: EXIT.usage,
  CHAINLAKE_STRICT_REJECTS: EXIT.strictRejects,
  CHAINLAKE_QUOTA_REACHED: EXIT.quotaReached,
  CHAINLAKE_VERIFY_DIFFERS: EXIT.differs,
  CHAINLAKE_LOCKED: EXIT.locked,
  CHAINLAKE_INTERRUPTED: EXIT.interrupted,
  CHAINLAKE_TERMINATED: EXIT.terminated,
};

/** The exit number of an error that ends a command: its code's, or 1 for anything unforeseen. */
export function exitCodeOfError(e: unknown): number {
  const code = chainlakeCodeOf(e);
  return code === undefined ? EXIT.windowsFailed : EXIT_OF_CODE[code];
}

/** An error whose message is for the user as is, with the code it carries (a usage error unless told). */
export class CliError extends ChainlakeError {
  constructor(message: string, code: ChainlakeErrorCode = 'CHAINLAKE_USAGE', hint?: string) {
    super(message, { code, hint });
  }
}
