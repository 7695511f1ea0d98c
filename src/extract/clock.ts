/** Time as the extract stage sees it; tests inject a virtual clock to check backoff without sleeping. */
export interface Clock {
  /** Milliseconds since the epoch (a virtual clock may start anywhere). */
  now(): number;
  /** Resolves after `ms`, or as soon as `signal` aborts (never rejects). */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Wall-clock milliseconds that never step backwards (pacing must not break when NTP adjusts the clock). */
export const systemClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  sleep: (ms, signal) =>
    new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      // The timer is cleared on abort, so an interrupted wait keeps no timer alive (the process can exit).
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      signal?.addEventListener('abort', done, { once: true });
    }),
};

interface Sleeper {
  at: number;
  seq: number;
  resolve: () => void;
}

/**
 * A discrete-event clock for tests: time moves only when the test says so, and sleepers wake in time order.
 * With `autoAdvance`, a sleep jumps the clock forward at once (for code that sleeps one call at a time, such
 * as the retry loop of a single request); every sleep is recorded in `sleeps` either way.
 */
export class VirtualClock implements Clock {
  private t: number;
  private seq = 0;
  private sleepers: Sleeper[] = [];
  readonly sleeps: number[] = [];
  /** Called on every sleep before it is scheduled: lets a test change the world between two attempts. */
  onSleep?: (ms: number) => void;

  constructor(
    start = 0,
    private readonly autoAdvance = false,
  ) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  sleep(ms: number): Promise<void> {
    const d = Math.max(0, ms);
    this.sleeps.push(d);
    this.onSleep?.(d);
    if (this.autoAdvance) {
      this.t += d;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.sleepers.push({ at: this.t + d, seq: this.seq++, resolve });
      this.sleepers.sort((a, b) => a.at - b.at || a.seq - b.seq);
    });
  }

  get pending(): number {
    return this.sleepers.length;
  }

  /** Moves time forward by `ms`, waking every sleeper due by then (in order, letting each one run). */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      await settle();
      const next = this.sleepers[0];
      if (!next || next.at > end) break;
      this.sleepers.shift();
      this.t = Math.max(this.t, next.at);
      next.resolve();
    }
    this.t = end;
    await settle();
  }

  /**
   * Moves time forward by `ms` without waking anyone, as a process busy elsewhere does: sleepers due meanwhile
   * wake late, at the next step or advance.
   */
  stall(ms: number): void {
    this.t += ms;
  }

  /** Wakes the earliest sleeper (moving time to it); false when nobody sleeps. */
  async step(): Promise<boolean> {
    await settle();
    const next = this.sleepers.shift();
    if (!next) return false;
    this.t = Math.max(this.t, next.at);
    next.resolve();
    await settle();
    return true;
  }
}

/** Lets every promise callback queued so far (and the ones they queue) run: one turn of the event loop. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
