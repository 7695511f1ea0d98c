import type { Clock } from './clock.js';

/**
 * One request-rate bound shared by every window of a run: a GCRA token bucket (each caller reserves the next
 * slot, so waiting callers are served in order and the rate holds over any interval), with AIMD — on
 * throttling the rate halves, and it climbs back by a tenth of the configured rate per calm second.
 */
export class RateLimiter {
  private tat = 0;
  private rate: number;
  private lastDecrease = -Infinity;
  private lastIncrease = 0;

  constructor(
    private readonly maxRate: number | undefined,
    private readonly burst: number,
    private readonly clock: Clock,
    private readonly minRate = 0.2,
  ) {
    this.rate = maxRate ?? Infinity;
    if (maxRate !== undefined && !(maxRate > 0)) throw new RangeError(`rps must be > 0, got ${maxRate}`);
    if (!(burst >= 1)) throw new RangeError(`burst must be >= 1, got ${burst}`);
  }

  get currentRate(): number {
    return this.rate;
  }

  async acquire(): Promise<void> {
    if (this.rate === Infinity) return;
    const now = this.clock.now();
    const interval = 1000 / this.rate;
    const tat = Math.max(this.tat, now) + interval;
    const allowedAt = tat - this.burst * interval;
    this.tat = tat;
    if (allowedAt > now) await this.clock.sleep(allowedAt - now);
  }

  onThrottle(): void {
    if (this.maxRate === undefined) return;
    const now = this.clock.now();
    // A burst of 429s from one overload is one signal, not many: halve at most once per second.
    if (now - this.lastDecrease < 1000) return;
    this.lastDecrease = now;
    this.lastIncrease = now;
    this.rate = Math.max(this.minRate, this.rate / 2);
  }

  onSuccess(): void {
    if (this.maxRate === undefined || this.rate >= this.maxRate) return;
    const now = this.clock.now();
    if (now - this.lastIncrease < 1000) return;
    this.lastIncrease = now;
    this.rate = Math.min(this.maxRate, this.rate + Math.max(this.minRate, this.maxRate / 10));
  }
}
