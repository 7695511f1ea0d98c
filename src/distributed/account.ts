/**
 * An API account in the distributed mode: the key(s) that share one rate limit and one daily quota. One worker at
 * a time holds an account (a lease, like the committer's), so the in-process rate limiter of that worker stays
 * exact; workers holding other accounts fetch side by side, and workers without one commit and stand by.
 *
 * The daily quota is counted in PostgreSQL per account and UTC day. Requests are reserved in blocks before they
 * are sent (`chainlake.request_usage.requests` counts reservations): a worker killed with part of a block unspent
 * leaves the quota under-used by at most that block, never exceeded; a worker that stops cleanly gives back what
 * it did not spend.
 */
import type pg from 'pg';
import { RequestQuota, RESERVATION_BLOCK, type QuotaGate } from '../extract/quota.js';
import { CONTROL_SCHEMA } from './control-plane.js';

/** The lease that makes a worker the one user of an account. */
export const accountLease = (account: string): string => `account:${account}`;

/**
 * What each connection is doing for the quotas that share it, chained: a worker's runs of one account share one
 * quota connection, and a top-up is a transaction that must not interleave with another's (both were granted
 * from the same count, beyond the quota).
 */
const onConnection = new WeakMap<object, Promise<unknown>>();
function inTurn<T>(client: object, work: () => Promise<T>): Promise<T> {
  const next = (onConnection.get(client) ?? Promise.resolve()).then(work, work);
  onConnection.set(
    client,
    next.catch(() => undefined),
  );
  return next;
}

export class SharedQuota implements QuotaGate {
  /** Reserved in PostgreSQL and not yet spent, for `day`. */
  private allowance = 0;
  /** Units of the allowance set aside by `ready` for the request that calls `take` next. */
  private held = 0;
  private day: string | undefined;
  private reachedOn: string | undefined;
  /** The day PostgreSQL granted nothing more: the account's quota is spent. */
  private exhaustedOn: string | undefined;
  private topping: Promise<void> | undefined;
  /** Requests this worker sent per UTC day. */
  readonly sent = new Map<string, number>();

  constructor(
    /** A connection of its own: its transactions must not interleave with the worker's. */
    private readonly client: Pick<pg.Client, 'query'>,
    readonly account: string,
    readonly limit: number,
    private readonly now: () => Date = () => new Date(),
    private readonly block = RESERVATION_BLOCK,
  ) {
    if (!(Number.isSafeInteger(limit) && limit >= 1)) throw new RangeError(`dailyRequestQuota must be a positive integer, got ${limit}`);
  }

  /**
   * Sets one unit aside for the caller's next `take`, topping the allowance up from today's quota in PostgreSQL
   * when it is spent (one top-up at a time). Each request's unit is its own: requests in flight at once never
   * see the last unit taken between their `ready` and their `take` (which had refused requests while the
   * quota still had room).
   */
  async ready(): Promise<void> {
    for (;;) {
      const today = RequestQuota.dayOf(this.now());
      if (this.day !== today) {
        this.day = today;
        this.allowance = 0;
        this.held = 0;
      }
      if (this.allowance > 0) {
        this.allowance--;
        this.held++;
        return;
      }
      if (this.exhaustedOn === today) return;
      this.topping ??= inTurn(this.client, () => this.topUp(today)).finally(() => (this.topping = undefined));
      await this.topping;
    }
  }

  private async topUp(today: string): Promise<void> {
    if (this.day !== today) {
      this.day = today;
      this.allowance = 0;
    }
    if (this.allowance > 0 || this.exhaustedOn === today) return;
    // One transaction with the day's row locked: what is granted is exactly what the row gains.
    await this.client.query('BEGIN');
    try {
      await this.client.query(`INSERT INTO ${CONTROL_SCHEMA}.request_usage (account, day, requests) VALUES ($1, $2, 0) ON CONFLICT DO NOTHING`, [
        this.account,
        today,
      ]);
      const used = Number(
        (await this.client.query(`SELECT requests FROM ${CONTROL_SCHEMA}.request_usage WHERE account = $1 AND day = $2 FOR UPDATE`, [this.account, today]))
          .rows[0].requests,
      );
      const grant = Math.max(0, Math.min(this.block, this.limit - used));
      if (grant > 0) {
        await this.client.query(`UPDATE ${CONTROL_SCHEMA}.request_usage SET requests = requests + $3 WHERE account = $1 AND day = $2`, [
          this.account,
          today,
          grant,
        ]);
      }
      await this.client.query('COMMIT');
      this.allowance += grant;
      if (grant === 0) this.exhaustedOn = today;
    } catch (error) {
      await this.client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  }

  take(): boolean {
    const today = RequestQuota.dayOf(this.now());
    if (this.day !== today || this.held <= 0) {
      this.reachedOn = today;
      return false;
    }
    this.held--;
    this.sent.set(today, (this.sent.get(today) ?? 0) + 1);
    return true;
  }

  /** Whether today's quota refused a request of this worker. */
  reachedToday(): boolean {
    return this.reachedOn === RequestQuota.dayOf(this.now());
  }

  /** Gives back what was reserved and not spent (a clean stop). */
  async release(): Promise<void> {
    if (!this.day || this.allowance + this.held <= 0) return;
    const back = this.allowance + this.held;
    this.allowance = 0;
    this.held = 0;
    const day = this.day;
    await inTurn(this.client, () =>
      this.client.query(`UPDATE ${CONTROL_SCHEMA}.request_usage SET requests = GREATEST(requests - $3, 0) WHERE account = $1 AND day = $2`, [
        this.account,
        day,
        back,
      ]),
    );
  }
}

/** Requests reserved (spent or held) per UTC day of an account, as PostgreSQL counts them. */
export async function accountUsage(client: Pick<pg.Client, 'query'>, account: string): Promise<Map<string, number>> {
  const r = await client.query(`SELECT CAST(day AS TEXT) AS day, requests FROM ${CONTROL_SCHEMA}.request_usage WHERE account = $1`, [account]);
  return new Map(r.rows.map((row) => [String(row.day), Number(row.requests)]));
}
