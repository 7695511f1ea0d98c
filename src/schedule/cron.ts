import { Cron } from 'croner';

/** A validated cron expression (5 or 6 fields), evaluated in UTC unless a time zone is given. */
export class CronSchedule {
  private readonly cron: Cron;

  constructor(
    readonly expression: string,
    readonly timezone = 'UTC',
  ) {
    this.cron = new Cron(expression, { paused: true, timezone });
  }

  /** The first fire time strictly after `after`, or undefined if the expression never fires again. */
  next(after: Date): Date | undefined {
    return this.cron.nextRun(after) ?? undefined;
  }
}

/** Returns a problem description, or undefined when the expression is valid. */
export function cronProblem(expression: string, timezone?: string): string | undefined {
  try {
    new CronSchedule(expression, timezone);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}
