import { ChainlakeError } from '../errors.js';
/**
 * The job's `dailyRequestQuota`, kept in process: every HTTP request (each attempt of a retried call counts, as
 * the service counts it) takes one unit of the current UTC day first, and request N+1 beyond the quota is
 * never sent. What earlier runs spent the same day comes from the catalog (`request_usage`); what this run
 * spends is recorded there with each commit.
 *
 * Between commits the process may be killed (kill -9, a lost machine) with its spending unrecorded: the next
 * run would then spend the same requests again and exceed the quota. So requests are reserved ahead in blocks,
 * and each reservation is written down (`reserve`) before the first request it covers is sent; recovery of a
 * dead run counts its reservation as spent. The quota can then only be under-used (by at most a block per dead
 * run), never exceeded.
 */
export class RequestQuota {
  /** This run's requests per UTC day (YYYY-MM-DD). */
  readonly sent = new Map<string, number>();
  /** Per UTC day: requests reserved (and written down) so far; `sent` never passes it. */
  private readonly reserved = new Map<string, number>();
  private reachedOn: string | undefined;

  constructor(
    /** Requests a day. */
    readonly limit: number,
    /** What the catalog says earlier runs spent per UTC day, for this account. */
    private readonly before: ReadonlyMap<string, number>,
    private readonly now: () => Date = () => new Date(),
    /**
     * Writes the reservations down, synchronously, before a request they cover is sent (see the class doc);
     * without it nothing is reserved (a caller that records usage some other way, tests).
     */
    private readonly reserve?: (days: Readonly<Record<string, number>>) => void,
    /** Requests reserved at once: one write per block. */
    private readonly block = RESERVATION_BLOCK,
  ) {
    if (!(Number.isSafeInteger(limit) && limit >= 1)) throw new RangeError(`dailyRequestQuota must be a positive integer, got ${limit}`);
  }

  static dayOf(d: Date): string {
    return d.toISOString().slice(0, 10);
  }

  /** Requests spent today, by earlier runs and this one. */
  usedToday(): number {
    const day = RequestQuota.dayOf(this.now());
    return (this.before.get(day) ?? 0) + (this.sent.get(day) ?? 0);
  }

  remainingToday(): number {
    return Math.max(0, this.limit - this.usedToday());
  }

  /** Takes one request of today's quota; false (and nothing taken) when today's is spent. */
  take(): boolean {
    const day = RequestQuota.dayOf(this.now());
    if ((this.before.get(day) ?? 0) + (this.sent.get(day) ?? 0) >= this.limit) {
      this.reachedOn = day;
      return false;
    }
    const sent = (this.sent.get(day) ?? 0) + 1;
    if (this.reserve && sent > (this.reserved.get(day) ?? 0)) {
      // Never reserve beyond what the day has left: a dead run's reservation counts as spent.
      this.reserved.set(day, Math.min(sent - 1 + this.block, this.limit - (this.before.get(day) ?? 0)));
      this.reserve(Object.fromEntries(this.reserved));
    }
    this.sent.set(day, sent);
    return true;
  }

  /** Whether a request was refused (the run then stops fetching). */
  get reached(): boolean {
    return this.reachedOn !== undefined;
  }
}

/**
 * What the transport asks before each request: `take` one unit of today's quota (false: refused, nothing sent).
 * `ready`, when there is one, runs first and may wait (a quota shared through a database tops up its allowance
 * there); RequestQuota needs none.
 */
export interface QuotaGate {
  readonly limit: number;
  ready?(): Promise<void>;
  take(): boolean;
}

/** Requests reserved per write (see RequestQuota): small against any real plan's quota, few writes per run. */
export const RESERVATION_BLOCK = 50;

/** A request the daily quota refused: it was not sent. */
export class QuotaReachedError extends ChainlakeError {
  constructor(readonly limit: number) {
    super(`the daily request quota of ${limit} requests is spent for today (UTC); the next run resumes from here`, {
      code: 'CHAINLAKE_QUOTA_REACHED',
      hint: "run again after 00:00 UTC, or raise the job's dailyRequestQuota if the plan allows more",
    });
  }
}

/**
 * The account a quota is kept for, without the key: the explorer's base URL (its origin and path, never its
 * query or credentials), or `simulator` for the embedded simulator (whose port changes from run to run).
 */
export function quotaAccount(target: { kind: 'simulator' } | { kind: 'api'; explorer?: string; finance?: string }): string {
  if (target.kind === 'simulator') return 'simulator';
  // A finance-only job has no explorer URL: its account is then the finance service's.
  const base = target.explorer ?? target.finance;
  if (base === undefined) return 'api';
  try {
    const u = new URL(base);
    return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}`;
  } catch {
    return 'api';
  }
}
