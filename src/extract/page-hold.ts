import type { PageBudget } from './budget.js';

/**
 * The page budget one window holds: one unit per page it launched and has not handed out yet. Spare units are
 * taken without waiting; a window holding none may wait for one, so every window can always progress. Without
 * a shared budget every take succeeds (and is still counted, so releases stay balanced).
 */
export class PageHold {
  private held = 0;

  constructor(private readonly budget: PageBudget | undefined) {}

  /** A spare unit, if any. */
  tryTake(): boolean {
    if (this.budget && !this.budget.tryAcquire()) return false;
    this.held++;
    return true;
  }

  /** A unit, waiting for one: only for a window holding none (see the class doc). */
  async take(): Promise<void> {
    if (this.tryTake()) return;
    await this.budget!.acquire();
    this.held++;
  }

  releaseOne(): void {
    if (this.held > 0) {
      this.held--;
      this.budget?.release();
    }
  }

  releaseAll(): void {
    while (this.held > 0) this.releaseOne();
  }
}
