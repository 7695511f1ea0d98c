// A worker's hold on its API account (account.ts): taken before a window is fetched, renewed in the background for
// as long as the worker lives, and asked for again only when its last grant has aged.
import type pg from 'pg';
import type { Logger } from '../pipeline/log.js';
import { accountLease } from './account.js';
import { takeLease } from './lease.js';

export class AccountHold {
  /** Whether this worker holds the account (false: another worker has it). */
  private held = false;
  /** When the lease was last asked for (before the ask: the lease runs from a moment after it). */
  private askedAt = -Infinity;
  private readonly renewal: NodeJS.Timeout;

  constructor(
    private readonly leases: Pick<pg.Client, 'query'>,
    private readonly worker: string,
    private readonly account: string,
    private readonly leaseSeconds: number,
    private readonly log: Logger,
  ) {
    // Held for as long as this worker lives, however long its windows take.
    this.renewal = setInterval(
      () => {
        if (this.held) void this.take().catch(() => undefined);
      },
      (leaseSeconds * 1000) / 3,
    );
  }

  /**
   * Whether a slot may start a window: the lease is asked for again only when its last grant is a third of a lease
   * old (it stands for the other two thirds, and the renewal keeps it younger than that). Asking before every
   * window cost a control-plane round trip per window and per idle poll of each slot.
   */
  async mayFetch(): Promise<boolean> {
    if (this.held && Date.now() - this.askedAt < (this.leaseSeconds * 1000) / 3) return true;
    return this.take();
  }

  stop(): void {
    clearInterval(this.renewal);
  }

  private async take(): Promise<boolean> {
    const asked = Date.now();
    const held = await takeLease(this.leases, this.worker, this.leaseSeconds, accountLease(this.account));
    if (held !== this.held)
      this.log.log(
        'info',
        held ? 'account.taken' : 'account.busy',
        `worker ${this.worker}: account ${this.account} ${held ? 'taken' : 'held by another worker'}`,
      );
    this.held = held;
    this.askedAt = asked;
    return held;
  }
}
