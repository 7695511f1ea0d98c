/** Exit codes (documented in the README): scripts and schedulers act on them. */
export const EXIT = {
  ok: 0,
  /** Some windows failed; what committed stays, and a re-run resumes. */
  windowsFailed: 1,
  /** Bad flags or a bad job file. */
  usage: 2,
  /** Rows did not convert and the run was --strict. */
  strictRejects: 3,
  /** The job's dailyRequestQuota is spent for today (UTC): what the run fetched is committed; the next run resumes. */
  quotaReached: 4,
  /** Another run holds the lake's lock (EX_TEMPFAIL). */
  locked: 75,
} as const;

/** An error whose message is for the user as is, with the exit code it maps to. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.usage,
  ) {
    super(message);
    this.name = 'CliError';
  }
}
