import { ChainlakeError } from '../errors.js';

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
  /** Another run holds the lake's lock (EX_TEMPFAIL). */
  locked: 75,
  /** Interrupted by Ctrl-C (128 + SIGINT); the run is marked `interrupted` and the next run resumes it. */
  interrupted: 130,
  /** Stopped by SIGTERM (128 + SIGTERM); as for `interrupted`. */
  terminated: 143,
} as const;

/** An error whose message is for the user as is, with the exit code it maps to (a usage error unless told). */
export class CliError extends ChainlakeError {
  constructor(message: string, exitCode: number = EXIT.usage, hint?: string) {
    super(message, { exitCode, hint });
  }
}
