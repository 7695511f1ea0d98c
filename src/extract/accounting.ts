import type { FailureReason } from './errors.js';
import type { RequestRecord } from './request-log.js';

/**
 * A log-scale latency histogram: bucket i holds latencies up to 0.1 ms × 1.2^i, so a percentile is exact to
 * within 20 % whatever the spread, in a fixed 100 counters (mergeable across windows and runs).
 */
export class LatencyHistogram {
  static readonly BUCKETS = 100;
  private static readonly BASE_MS = 0.1;
  private static readonly GROWTH = 1.2;
  readonly counts = new Uint32Array(LatencyHistogram.BUCKETS);
  total = 0;

  private static upper(i: number): number {
    return LatencyHistogram.BASE_MS * LatencyHistogram.GROWTH ** i;
  }

  record(ms: number): void {
    const i = ms <= LatencyHistogram.BASE_MS ? 0 : Math.ceil(Math.log(ms / LatencyHistogram.BASE_MS) / Math.log(LatencyHistogram.GROWTH));
    this.counts[Math.min(LatencyHistogram.BUCKETS - 1, Math.max(0, i))]!++;
    this.total++;
  }

  add(other: LatencyHistogram): void {
    for (let i = 0; i < LatencyHistogram.BUCKETS; i++) this.counts[i]! += other.counts[i]!;
    this.total += other.total;
  }

  /** The upper bound of the bucket holding the q-quantile (0 < q ≤ 1), in ms; 0 when empty. */
  quantile(q: number): number {
    if (this.total === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.total));
    let seen = 0;
    for (let i = 0; i < LatencyHistogram.BUCKETS; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return LatencyHistogram.upper(i);
    }
    return LatencyHistogram.upper(LatencyHistogram.BUCKETS - 1);
  }
}

/** A plain-object view of an Accounting, for the run report (JSON) and the catalog. */
export interface AccountingSummary {
  requests: number;
  responses: number;
  retries: number;
  throttles: number;
  bytes: number;
  failures: Partial<Record<FailureReason, number>>;
  backoffWaitMs: number;
  rateWaitMs: number;
  latencyMs: { mean: number; p50: number; p90: number; p99: number; max: number };
}

/** What a window (or a run) cost in calls, for the run report and the catalog. */
export class Accounting {
  /** HTTP requests sent, every attempt counted (a retried call is several requests). */
  requests = 0;
  /** Requests that got a complete response (any status). */
  responses = 0;
  /** Attempts that were repeated after a transient failure. */
  retries = 0;
  /** Failures that were the server pacing us (429, throttle envelopes). */
  throttles = 0;
  /** Response body bytes received. */
  bytes = 0;
  /** Failed attempts by reason (transient and terminal). */
  readonly failures: Partial<Record<FailureReason, number>> = {};
  /** Time spent waiting between attempts (backoff, Retry-After). */
  backoffWaitMs = 0;
  /** Time spent waiting for the run's rate limiter. */
  rateWaitMs = 0;
  latencyTotalMs = 0;
  latencyMaxMs = 0;
  readonly latency = new LatencyHistogram();
  /**
   * A window's calls, one record each (its lineage: the catalog's `requests` table), in the order they were made.
   * Kept per window, never summed by `add`: a run's records are its windows'.
   */
  readonly calls: RequestRecord[] = [];

  recordRequest(): void {
    this.requests++;
  }

  recordResponse(latencyMs: number, bytes: number): void {
    this.responses++;
    this.bytes += bytes;
    this.latencyTotalMs += latencyMs;
    if (latencyMs > this.latencyMaxMs) this.latencyMaxMs = latencyMs;
    this.latency.record(latencyMs);
  }

  recordFailure(reason: FailureReason): void {
    this.failures[reason] = (this.failures[reason] ?? 0) + 1;
  }

  add(other: Accounting): void {
    this.requests += other.requests;
    this.responses += other.responses;
    this.retries += other.retries;
    this.throttles += other.throttles;
    this.bytes += other.bytes;
    for (const [k, v] of Object.entries(other.failures) as [FailureReason, number][]) this.failures[k] = (this.failures[k] ?? 0) + v;
    this.backoffWaitMs += other.backoffWaitMs;
    this.rateWaitMs += other.rateWaitMs;
    this.latencyTotalMs += other.latencyTotalMs;
    this.latencyMaxMs = Math.max(this.latencyMaxMs, other.latencyMaxMs);
    this.latency.add(other.latency);
  }

  get latencyMeanMs(): number {
    return this.responses === 0 ? 0 : this.latencyTotalMs / this.responses;
  }

  summary(): AccountingSummary {
    const r = (x: number): number => Math.round(x * 10) / 10;
    return {
      requests: this.requests,
      responses: this.responses,
      retries: this.retries,
      throttles: this.throttles,
      bytes: this.bytes,
      failures: { ...this.failures },
      backoffWaitMs: Math.round(this.backoffWaitMs),
      rateWaitMs: Math.round(this.rateWaitMs),
      latencyMs: {
        mean: r(this.latencyMeanMs),
        // A bucket's upper bound can pass the largest value seen; the max is exact.
        p50: r(Math.min(this.latencyMaxMs, this.latency.quantile(0.5))),
        p90: r(Math.min(this.latencyMaxMs, this.latency.quantile(0.9))),
        p99: r(Math.min(this.latencyMaxMs, this.latency.quantile(0.99))),
        max: r(this.latencyMaxMs),
      },
    };
  }
}
