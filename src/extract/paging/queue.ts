import type { Accounting } from '../accounting.js';
import type { PageHold } from '../page-hold.js';
import type { FetchedPage, PageFetcher, PageRequest } from '../page.js';
import type { PageCursor, Segment } from './cursor.js';

/** One page requested (or in hand), in the order it is handed out. */
export interface Slot {
  req: PageRequest;
  seg: Segment;
  /** Last page of its segment. */
  last: boolean;
  done: boolean;
  validated: boolean;
  page?: FetchedPage;
  error?: unknown;
  /** Resolves (never rejects) once the request settled. */
  settledP?: Promise<void>;
}

/** What the queue asks of its owner as pages arrive, in order. */
export interface SlotChecks {
  /** Throws what is wrong with an arrived page. */
  validate(slot: Slot): void;
  /** The last page of its segment was validated: plan what comes next (the cursor moves). */
  segmentEnded(slot: Slot): void;
}

/**
 * The pages of a range in flight or in hand, in order: up to `prefetch` requests ahead of the consumer, within
 * the page budget the range holds (one unit a page until it is handed out), each page checked as soon as it and
 * every page before it arrived.
 */
export class PageQueue {
  private slots: Slot[] = [];
  private wake: (() => void) | undefined;
  private abandoned = false;

  constructor(
    private readonly fetch: PageFetcher,
    private readonly acct: Accounting,
    private readonly progress: { pages: number },
    private readonly prefetch: number,
    private readonly hold: PageHold,
    private readonly cursor: PageCursor,
    private readonly checks: SlotChecks,
  ) {}

  /** A page already in hand (the first ones), as the next slot of the cursor's segment. */
  pushFetched(req: PageRequest, page: FetchedPage): Slot {
    const seg = this.cursor.seg!;
    const slot: Slot = { req, seg, last: this.cursor.isLast(req, seg), done: true, validated: false, page, settledP: Promise.resolve() };
    this.cursor.advance(req.limit);
    this.slots.push(slot);
    return slot;
  }

  /** The next page to hand out, if any is in flight or in hand. */
  head(): Slot | undefined {
    return this.slots[0];
  }

  shift(): void {
    this.slots.shift();
  }

  /** Resolves when the next request settles. */
  settling(): Promise<void> {
    return new Promise<void>((resolve) => (this.wake = resolve));
  }

  /** Launches what the plan allows: up to `prefetch` pages ahead, within spare page budget. Synchronous. */
  launchReady(): void {
    for (;;) {
      const req = this.cursor.next();
      if (!req || this.slots.length >= this.prefetch || !this.hold.tryTake()) return;
      this.launch(req);
    }
  }

  /** The consumer's top-up: like launchReady, but a range with nothing in flight waits for budget. */
  async topUp(): Promise<void> {
    this.launchReady();
    if (this.slots.length > 0 || !this.cursor.next()) return;
    await this.hold.take();
    // Nothing was in flight, so nothing changed the plan while we waited.
    this.launch(this.cursor.next()!);
    this.launchReady();
  }

  private launch(req: PageRequest): void {
    const seg = this.cursor.seg!;
    const slot: Slot = { req, seg, last: this.cursor.isLast(req, seg), done: false, validated: false };
    this.cursor.advance(req.limit);
    this.slots.push(slot);
    slot.settledP = this.fetch(req, this.acct).then(
      (page) => {
        this.progress.pages++;
        slot.page = page;
        this.settled(slot);
      },
      (error: unknown) => {
        slot.error = error;
        this.settled(slot);
      },
    );
  }

  private settled(slot: Slot): void {
    slot.done = true;
    if (this.abandoned) return;
    this.validateReady();
    this.launchReady();
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** Checks arrived pages in order (as soon as they arrive, before the consumer takes them). */
  validateReady(): void {
    for (const slot of this.slots) {
      if (slot.validated) continue;
      if (!slot.done || slot.error !== undefined) return;
      try {
        this.checks.validate(slot);
      } catch (e) {
        slot.error = e;
        return;
      }
      slot.validated = true;
      if (slot.last) this.checks.segmentEnded(slot);
    }
  }

  /** On error or early stop: nothing launched any more; resolves once no request is left unobserved. */
  abandon(): Promise<unknown> {
    this.abandoned = true;
    const pending = this.slots.filter((s) => !s.done).map((s) => s.settledP);
    this.slots = [];
    return Promise.all(pending);
  }
}
