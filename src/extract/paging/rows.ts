import { CountDrift } from './refetch.js';

/** Rows of one pass over a window: subtracted again from the progress when the pass is thrown away. */
export interface Tally {
  expected: number;
  got: number;
}

/**
 * The rows of one block range: what its count promised (`total`), what arrived in validated pages, and the
 * pass's tally and the window's progress, kept in step with them.
 */
export class RangeRows {
  total = 0;
  validated = 0;

  constructor(
    private readonly tally: Tally,
    private readonly progress: { rowsExpected: number; rowsGot: number },
  ) {}

  /** The range's count, from its first page. */
  counted(count: number): void {
    this.total = count;
    this.tally.expected += count;
    this.progress.rowsExpected += count;
  }

  /** The range is split and each part counts its own rows. */
  uncount(count: number): void {
    this.tally.expected -= count;
    this.progress.rowsExpected -= count;
  }

  arrived(rows: number): void {
    this.validated += rows;
  }

  handedOut(rows: number): void {
    this.tally.got += rows;
    this.progress.rowsGot += rows;
  }

  /** The window stops early with the `kept` rows it validated: what it promised shrinks to them. */
  keep(kept: number): void {
    this.uncount(this.total - kept);
    this.total = kept;
    this.validated = kept;
  }

  /** Rows the count promised that no validated page has held yet. */
  get left(): number {
    return this.total - this.validated;
  }

  /** Every promised row arrived. */
  settle(): void {
    if (this.validated !== this.total) throw new CountDrift(`got ${this.validated} rows of ${this.total}`);
  }
}
