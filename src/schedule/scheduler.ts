import { CronSchedule } from './cron.js';

export interface ScheduledJob {
  /** Job file path, also the job's identity in logs. */
  file: string;
  schedule: CronSchedule;
}

export interface SchedulerClock {
  now(): Date;
  /** Resolves at `until` or when `signal` aborts, whichever comes first. */
  sleepUntil(until: Date, signal: AbortSignal): Promise<void>;
}

export type SchedulerEvent =
  | { kind: 'scheduled'; file: string; at: Date }
  | { kind: 'started'; file: string; at: Date }
  | { kind: 'finished'; file: string; at: Date; exitCode: number; durationMs: number }
  | { kind: 'skipped'; file: string; at: Date; reason: string };

export interface SchedulerDeps {
  clock: SchedulerClock;
  /** Runs one job to completion and returns its exit code (the CLI runs `chainlake run` in a child process). */
  run: (file: string) => Promise<number>;
  onEvent: (e: SchedulerEvent) => void;
}

/** A clock that sleeps with real timers. */
export const realSchedulerClock: SchedulerClock = {
  now: () => new Date(),
  sleepUntil: (until, signal) =>
    new Promise((resolve) => {
      if (signal.aborted) return resolve();
      // Long sleeps are chunked: timers drift and the wall clock can jump (suspend, NTP), so re-check often.
      const ms = Math.min(Math.max(0, until.getTime() - Date.now()), 60_000);
      const t = setTimeout(done, ms);
      function done(): void {
        signal.removeEventListener('abort', done);
        clearTimeout(t);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    }),
};

/**
 * Fires each job on its cron expression. A job never overlaps itself: if its previous run is still going
 * when it is due, that firing is skipped (and logged), like Kubernetes' `concurrencyPolicy: Forbid`.
 * Different jobs may run at the same time; their lakes' locks keep two runs off one lake.
 */
export class Scheduler {
  private readonly running = new Map<string, Promise<void>>();
  private readonly next = new Map<string, Date>();

  constructor(
    private readonly jobs: readonly ScheduledJob[],
    private readonly deps: SchedulerDeps,
  ) {}

  /** Runs until `signal` aborts; then waits for runs in progress to finish. */
  async start(signal: AbortSignal): Promise<void> {
    const { clock, onEvent } = this.deps;
    for (const job of this.jobs) this.plan(job, clock.now());
    while (!signal.aborted) {
      const upcoming = [...this.next.values()];
      if (upcoming.length === 0) break;
      const soonest = new Date(Math.min(...upcoming.map((d) => d.getTime())));
      if (clock.now() < soonest) {
        await clock.sleepUntil(soonest, signal);
        continue;
      }
      const now = clock.now();
      for (const job of this.jobs) {
        const due = this.next.get(job.file);
        if (!due || due > now) continue;
        if (this.running.has(job.file)) onEvent({ kind: 'skipped', file: job.file, at: now, reason: 'its previous run is still going' });
        else this.fire(job, now);
        this.plan(job, now);
      }
    }
    await Promise.allSettled([...this.running.values()]);
  }

  private plan(job: ScheduledJob, after: Date): void {
    const at = job.schedule.next(after);
    if (at) {
      this.next.set(job.file, at);
      this.deps.onEvent({ kind: 'scheduled', file: job.file, at });
    } else this.next.delete(job.file);
  }

  private fire(job: ScheduledJob, at: Date): void {
    const { clock, run, onEvent } = this.deps;
    onEvent({ kind: 'started', file: job.file, at });
    const started = clock.now().getTime();
    const p = run(job.file)
      .catch(() => 1)
      .then((exitCode) => {
        onEvent({ kind: 'finished', file: job.file, at: clock.now(), exitCode, durationMs: clock.now().getTime() - started });
      })
      .finally(() => this.running.delete(job.file));
    this.running.set(job.file, p);
  }
}
