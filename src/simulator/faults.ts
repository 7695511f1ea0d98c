// Seeded fault injection and the server-side token bucket.

import { hash2, unit } from './rng.js';

export type FaultKind = '429' | 'throttle' | '500' | '502' | '503' | 'reset' | 'stall' | 'truncated' | 'non-json';
export const ALL_FAULT_KINDS: FaultKind[] = ['429', 'throttle', '500', '502', '503', 'reset', 'stall', 'truncated', 'non-json'];
/** Kinds used when `kinds` is omitted: everything but `stall`, which holds a connection until the client gives up. */
export const DEFAULT_FAULT_KINDS: FaultKind[] = ['429', 'throttle', '500', '502', '503', 'reset', 'truncated', 'non-json'];

export interface FaultOptions {
  rate: number;
  kinds?: FaultKind[];
  seed?: number;
  retryAfterSeconds?: number;
  stallMs?: number;
}

export class FaultPlan {
  private n = 0;
  readonly kinds: FaultKind[];
  readonly seed: number;
  constructor(readonly opts: FaultOptions) {
    if (!(opts.rate >= 0 && opts.rate <= 1)) throw new RangeError(`fault rate must be within 0..1, got ${opts.rate}`);
    this.kinds = opts.kinds && opts.kinds.length > 0 ? [...opts.kinds] : DEFAULT_FAULT_KINDS;
    for (const k of this.kinds) if (!ALL_FAULT_KINDS.includes(k)) throw new RangeError(`unknown fault kind '${k}'`);
    this.seed = (opts.seed ?? 1) >>> 0;
  }
  /** The fault for the next request, or null. Deterministic in the order requests arrive. */
  next(): FaultKind | null {
    const i = this.n++;
    if (this.opts.rate <= 0) return null;
    if (this.opts.rate < 1 && unit(hash2(this.seed, i)) >= this.opts.rate) return null;
    return this.kinds[hash2(this.seed ^ 0x0fa17, i) % this.kinds.length]!;
  }
  get retryAfterSeconds(): number {
    return this.opts.retryAfterSeconds ?? 1;
  }
  get stallMs(): number {
    return this.opts.stallMs ?? 60_000;
  }
}

export interface RateLimitOptions {
  rps: number;
  burst?: number;
}

export class TokenBuckets {
  private buckets = new Map<string, { tokens: number; at: number }>();
  constructor(readonly opts: RateLimitOptions) {
    if (!(opts.rps > 0)) throw new RangeError(`rate limit rps must be > 0, got ${opts.rps}`);
  }
  /** 0 when admitted, else the seconds to wait (>= 1, for Retry-After). */
  take(key: string, nowMs: number): number {
    const burst = Math.max(1, this.opts.burst ?? Math.ceil(this.opts.rps));
    let b = this.buckets.get(key);
    if (!b) {
      b = { tokens: burst, at: nowMs };
      this.buckets.set(key, b);
    }
    b.tokens = Math.min(burst, b.tokens + ((nowMs - b.at) / 1000) * this.opts.rps);
    b.at = nowMs;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / this.opts.rps));
  }
}
