/**
 * A counting semaphore for pages fetched but not yet consumed, shared by every window of a run: it bounds
 * the run's page buffering (memory) however many windows prefetch at once.
 */
export class PageBudget {
  private available: number;
  private readonly waiters: (() => void)[] = [];

  constructor(readonly size: number) {
    if (!(size >= 1)) throw new RangeError(`page budget must be >= 1, got ${size}`);
    this.available = size;
  }

  tryAcquire(): boolean {
    if (this.available > 0) {
      this.available--;
      return true;
    }
    return false;
  }

  acquire(): Promise<void> {
    if (this.tryAcquire()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.available++;
  }
}
