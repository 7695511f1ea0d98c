import type { Clock } from './clock.js';

export interface RateLimiterOptions {
  /** Requests per second, the ceiling the rate never exceeds. Undefined: unbounded until throttled, then learned. */
  rps?: number;
  /** Requests allowed back to back after idling, at the full rate. Default: a tenth of a second's worth. */
  burst?: number;
  clock: Clock;
  /** The rate never backs off below this (requests per second). */
  minRate?: number;
}

const WINDOW_MS = 2000;
const BUCKET_MS = 100;
/** How long the rate holds after a change before it may change again (one "round" of AIMD). */
const ROUND_MS = 1000;
/** Grants in the meter's window needed before the measured rate is believed. */
const MIN_EVIDENCE = 10;

/** Events per second over the last two seconds (or since `since`, if later), in 100 ms buckets. */
class RateMeter {
  private readonly n = WINDOW_MS / BUCKET_MS;
  private readonly counts = new Float64Array(this.n);
  private readonly stamps = new Float64Array(this.n).fill(-1);

  add(now: number): void {
    const b = Math.floor(now / BUCKET_MS);
    const slot = ((b % this.n) + this.n) % this.n;
    if (this.stamps[slot] !== b) {
      this.stamps[slot] = b;
      this.counts[slot] = 0;
    }
    this.counts[slot]!++;
  }

  count(now: number): number {
    const b = Math.floor(now / BUCKET_MS);
    let sum = 0;
    for (let i = 0; i < this.n; i++) if (this.stamps[i]! > b - this.n && this.stamps[i]! <= b) sum += this.counts[i]!;
    return sum;
  }

  rate(now: number, since: number): number {
    const b = Math.floor(now / BUCKET_MS);
    const sum = this.count(now);
    // The time the counted buckets cover: from the oldest one's start (or `since`) to now.
    const span = Math.max(BUCKET_MS, now - Math.max(since, (b - this.n + 1) * BUCKET_MS));
    return (sum * 1000) / span;
  }
}

/**
 * One request-rate bound shared by every window of a run.
 *
 * Pacing is GCRA (a token bucket kept as one "theoretical arrival time"): each caller reserves the next slot,
 * so waiting callers are served in order, and over any interval T at most `rate × T + burst` requests are
 * granted. `burst` is how many may go back to back after idling; it shrinks in proportion when the rate backs
 * off, and a throttle leaves no burst credit (pacing restarts from zero).
 *
 * AIMD on throttling (429, throttle envelopes): at most once per round (1 s), and only for a request granted
 * after the last decrease (a volley of 429s from one overload is one signal), the rate drops to 90 % of the
 * rate the server actually accepted over the last two seconds, but by no more than half and no less than a
 * tenth of what we were sending. It climbs back by a tenth of the ceiling per round. `Retry-After` on a
 * throttle pauses every caller.
 *
 * Without a configured rps the limiter is unbounded until the first throttle backed by enough evidence (ten
 * requests in the window), and from then on paces at the rate learned from it (the accepted rate), climbing
 * by a tenth of the best accepted rate per round and never backing off below half of it.
 */
export class RateLimiter {
  private readonly ceiling: number | undefined;
  private readonly burstAtCeiling: number | undefined;
  private readonly clock: Clock;
  private readonly minRate: number;
  private rate: number;
  private tat = 0;
  /**
   * The same pace over the grants as they were really made. A caller sleeping on its reservation can wake late
   * (the process was busy): every late sleeper would then go at once, and the requests really sent in one
   * second could exceed rps + burst. Each grant must also keep this pace, measured at the time it is made.
   */
  private grantedTat = 0;
  /** Bumped whenever the pace changes, so that callers sleeping on an old reservation re-reserve. */
  private epoch = 0;
  private pausedUntil = -Infinity;
  private lastDecrease = -Infinity;
  private lastChange: number;
  /** First grant: rates are measured from here, not from an idle start. */
  private started = Infinity;
  private readonly grants = new RateMeter();
  private readonly accepted = new RateMeter();
  /** Learned mode: the best accepted rate measured at a throttle; sizes the step and floors the decrease. */
  private bestAccepted = 0;

  constructor(opts: RateLimiterOptions) {
    if (opts.rps !== undefined && !(opts.rps > 0 && Number.isFinite(opts.rps))) throw new RangeError(`rps must be > 0, got ${opts.rps}`);
    if (opts.burst !== undefined && !(opts.burst >= 1 && Number.isFinite(opts.burst))) throw new RangeError(`burst must be >= 1, got ${opts.burst}`);
    this.ceiling = opts.rps;
    this.burstAtCeiling = opts.rps === undefined ? undefined : (opts.burst ?? Math.max(1, Math.ceil(opts.rps / 10)));
    this.clock = opts.clock;
    this.minRate = Math.min(opts.minRate ?? 0.5, opts.rps ?? Infinity);
    this.rate = opts.rps ?? Infinity;
    this.lastChange = this.clock.now();
  }

  /** The current allowed rate in requests per second (Infinity: not limited). */
  get currentRate(): number {
    return this.rate;
  }

  /** Back-to-back requests allowed at the current rate. */
  get burst(): number {
    if (this.rate === Infinity) return Infinity;
    if (this.ceiling !== undefined) return Math.max(1, Math.floor((this.burstAtCeiling! * this.rate) / this.ceiling));
    return Math.max(1, Math.ceil(this.rate / 10));
  }

  /** Waits for a slot; returns the time it was granted. */
  async acquire(): Promise<number> {
    for (;;) {
      const now = this.clock.now();
      if (now < this.pausedUntil) {
        await this.clock.sleep(this.pausedUntil - now);
        continue;
      }
      if (this.rate === Infinity) return this.grant(now);
      const interval = 1000 / this.rate;
      const tat = Math.max(this.tat, now) + interval;
      const allowedAt = tat - this.burst * interval;
      this.tat = tat;
      const epoch = this.epoch;
      // Timers may fire a hair early against the clock: never grant before the slot.
      for (let t = now; t < allowedAt && epoch === this.epoch; t = this.clock.now()) await this.clock.sleep(allowedAt - t);
      if (epoch !== this.epoch || this.clock.now() < this.pausedUntil) continue; // the pace changed: a new reservation
      // On the slot, or late: then only at the pace of the grants really made (see grantedTat).
      for (;;) {
        const at = this.clock.now();
        const due = this.grantedTat - (this.burst - 1) * interval;
        if (due <= at) {
          this.grantedTat = Math.max(this.grantedTat, at) + interval;
          return this.grant(at);
        }
        await this.clock.sleep(due - at);
        if (epoch !== this.epoch) break;
      }
    }
  }

  private grant(now: number): number {
    if (this.started === Infinity) this.started = now;
    this.grants.add(now);
    return now;
  }

  /** No request is granted before `until` (a server's Retry-After on a throttle applies to every caller). */
  pause(until: number): void {
    if (until <= this.pausedUntil) return;
    this.pausedUntil = until;
    this.restartPacing(this.clock.now());
  }

  /** The server throttled a request that was granted at `grantedAt`. */
  onThrottle(grantedAt: number, retryAfterMs?: number): void {
    const now = this.clock.now();
    if (retryAfterMs !== undefined && retryAfterMs > 0) this.pause(now + retryAfterMs);
    if (grantedAt < this.lastDecrease || now - this.lastDecrease < ROUND_MS) return;
    // What we really sent: our pace, or less when the callers did not use all of it. A handful of grants
    // says nothing about a rate; without a pace of our own, the pause and the per-request backoff suffice.
    let effective: number;
    if (this.grants.count(now) >= MIN_EVIDENCE) effective = Math.min(this.rate, this.grants.rate(now, this.started));
    else if (this.rate !== Infinity) effective = this.rate;
    else return;
    effective = Math.max(this.minRate, effective);
    const accepted = this.accepted.rate(now, this.started);
    let target = Math.min(0.9 * effective, Math.max(0.5 * effective, 0.9 * accepted));
    if (this.ceiling === undefined) {
      // Throttles that do not stop when we slow down are not about our rate (a flaky gateway, a shared key):
      // the learned rate never backs off below half the best rate the server has accepted.
      this.bestAccepted = Math.max(this.bestAccepted, accepted);
      target = Math.max(target, 0.5 * this.bestAccepted);
    }
    this.rate = Math.min(this.rate, Math.max(this.minRate, target));
    this.lastDecrease = this.lastChange = now;
    this.restartPacing(now);
  }

  /** A request went through. */
  onSuccess(): void {
    const now = this.clock.now();
    this.accepted.add(now);
    if (this.rate === Infinity || (this.ceiling !== undefined && this.rate >= this.ceiling)) return;
    if (now - this.lastChange < ROUND_MS) return;
    const step = Math.max(this.minRate, (this.ceiling ?? this.bestAccepted) / 10);
    // Callers already sleeping keep their (slower) slots; the faster pace applies from the next reservation.
    this.rate = Math.min(this.ceiling ?? Infinity, this.rate + step);
    this.lastChange = now;
  }

  /** Pacing restarts at the later of now and the pause's end, with no burst credit. */
  private restartPacing(now: number): void {
    this.epoch++;
    if (this.rate === Infinity) return;
    const interval = 1000 / this.rate;
    this.tat = Math.max(now, this.pausedUntil) + (this.burst - 1) * interval;
    this.grantedTat = this.tat;
  }
}
