import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../src/extract/clock.js';
import { RateLimiter } from '../../src/extract/rate-limiter.js';
import { maxInWindow } from './helpers.js';

/** Starts `n` callers that each acquire `each` times in a row, and runs virtual time until all are done. */
async function drive(limiter: RateLimiter, clock: VirtualClock, n: number, each: number, onGrant?: (t: number) => void): Promise<number[]> {
  const grants: number[] = [];
  let done = 0;
  for (let c = 0; c < n; c++) {
    void (async () => {
      for (let i = 0; i < each; i++) {
        const t = await limiter.acquire();
        grants.push(t);
        onGrant?.(t);
      }
      done++;
    })();
  }
  for (let guard = 0; done < n && guard < 1_000_000; guard++) if (!(await clock.step())) await clock.advance(0);
  expect(done).toBe(n);
  return grants;
}

/** A server-side token bucket (what the API does), in virtual time. */
class ServerBucket {
  private tokens: number;
  private at = 0;
  constructor(
    readonly rps: number,
    readonly burst: number,
  ) {
    this.tokens = burst;
  }
  admit(now: number): boolean {
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) / 1000) * this.rps);
    this.at = now;
    if (this.tokens >= 1) {
      this.tokens--;
      return true;
    }
    return false;
  }
}

describe('rate limiter (virtual time)', () => {
  it('lets `burst` go at once, then paces at rps; never more than rps + burst - 1 in any second', async () => {
    const clock = new VirtualClock(0);
    const limiter = new RateLimiter({ rps: 20, burst: 5, clock });
    const grants = await drive(limiter, clock, 8, 25);
    expect(grants.filter((t) => t === 0)).toHaveLength(5);
    expect(maxInWindow(grants)).toBeLessThanOrEqual(20 + 5 - 1);
    // 200 requests: 5 at once, 195 more at 20/s.
    expect(Math.max(...grants)).toBeCloseTo((195 * 1000) / 20, 5);
  });

  it('keeps rps + burst - 1 in any second of the grants really made when its callers wake late (a busy process)', async () => {
    const clock = new VirtualClock(0);
    const limiter = new RateLimiter({ rps: 20, burst: 5, clock });
    let stalled = false;
    const grants = await drive(limiter, clock, 8, 25, (t) => {
      // Two seconds in, the process is busy for one second: every caller's slot passes meanwhile.
      if (!stalled && t >= 2000) {
        stalled = true;
        clock.stall(1000);
      }
    });
    expect(stalled).toBe(true);
    expect(maxInWindow(grants)).toBeLessThanOrEqual(20 + 5 - 1);
    // The pace resumes at once, with the burst the idle second earned, and nothing is lost.
    expect(grants).toHaveLength(200);
    expect(Math.max(...grants)).toBeLessThan(1000 + 1000 + (195 * 1000) / 20);
  });

  it('is unbounded without an rps until throttled', async () => {
    const clock = new VirtualClock(0);
    const limiter = new RateLimiter({ clock });
    const grants = await drive(limiter, clock, 4, 50);
    expect(new Set(grants)).toEqual(new Set([0]));
    expect(limiter.currentRate).toBe(Infinity);
  });

  it('backs off multiplicatively once per volley, and recovers additively to the ceiling', async () => {
    const clock = new VirtualClock(0);
    const limiter = new RateLimiter({ rps: 100, burst: 10, clock });
    await drive(limiter, clock, 4, 100, () => limiter.onSuccess()); // ~4 s at 100/s
    const t = clock.now();
    limiter.onThrottle(t - 5);
    const after = limiter.currentRate;
    expect(after).toBeLessThanOrEqual(90);
    expect(after).toBeGreaterThanOrEqual(50);
    // More 429s of requests sent before the decrease are the same overload: no further cut.
    limiter.onThrottle(t - 1);
    await clock.advance(1500);
    limiter.onThrottle(t - 1);
    expect(limiter.currentRate).toBe(after);
    // Calm: +10 % of the ceiling per second, back to the ceiling and no further.
    const rates: number[] = [];
    for (let i = 0; i < 10; i++) {
      await clock.advance(1000);
      limiter.onSuccess();
      rates.push(limiter.currentRate);
    }
    expect(rates[0]).toBeCloseTo(after + 10, 5);
    expect(rates.at(-1)).toBe(100);
  });

  it('a Retry-After pauses every caller, and pacing resumes without a burst', async () => {
    const clock = new VirtualClock(0);
    const limiter = new RateLimiter({ rps: 10, burst: 5, clock });
    await clock.advance(10_000);
    limiter.onThrottle(clock.now(), 3000);
    const grants = await drive(limiter, clock, 6, 1);
    expect(Math.min(...grants)).toBe(13_000);
    // Spaced by the (reduced) rate from the first one: no burst credit after a throttle.
    const sorted = grants.sort((a, b) => a - b);
    for (let i = 1; i < sorted.length; i++) expect(sorted[i]! - sorted[i - 1]!).toBeGreaterThanOrEqual(1000 / limiter.currentRate - 1e-9);
  });

  it.each([
    ['with --rps above the server limit', 200],
    ['without --rps (learning the rate)', undefined],
  ])('converges under a server limit %s: few 429s, most of the server rate used', async (_, rps) => {
    const clock = new VirtualClock(0);
    const limiter = new RateLimiter({ rps, clock });
    const server = new ServerBucket(50, 50);
    const late: { ok: number; throttled: number } = { ok: 0, throttled: 0 };
    let sent = 0;
    await drive(limiter, clock, 16, 120, (t) => {
      sent++;
      const admitted = server.admit(t);
      if (admitted) limiter.onSuccess();
      else limiter.onThrottle(t, 1000);
      if (t >= 20_000) {
        if (admitted) late.ok++;
        else late.throttled++;
      }
    });
    expect(sent).toBe(16 * 120);
    const lateSeconds = (clock.now() - 20_000) / 1000;
    // After the first 20 s: under 3 % of requests throttled, and at least 85 % of the server's rate achieved.
    expect(late.throttled / (late.ok + late.throttled)).toBeLessThan(0.03);
    expect(late.ok / lateSeconds).toBeGreaterThan(0.85 * 50);
  });
});
