import type { BlockRange, PageRequest } from '../page.js';

/** One block range of a window: `to` and `offset0` move as paging continues past the cap. */
export interface Segment {
  range?: BlockRange;
  /** Offset of the segment's first page (rows of its edge block we already have). */
  offset0: number;
  /** The count the segment's range must report. */
  expected: number;
  /** Offset where the segment's paging stops: its count, or the cap. */
  end: number;
}

/**
 * Where a range's paging stands: the segment being paged and the offset of its next page. A range is one
 * segment, or several when it is continued past the result-window cap; `finished` once nothing is left to plan.
 */
export class PageCursor {
  seg: Segment | undefined;
  private nextOffset = 0;
  /** Segments started: more than one means the range was paged in parts (and is re-counted at the end). */
  segments = 0;
  finished = false;

  constructor(
    private readonly limit: number,
    private readonly cap: number,
    private readonly progress: { parts: number },
  ) {}

  start(seg: Segment): void {
    this.seg = seg;
    this.nextOffset = seg.offset0;
    this.segments++;
    this.progress.parts++;
  }

  /** Past the page the cursor stands on: launched, or already in hand. */
  advance(limit: number): void {
    this.nextOffset += limit;
  }

  /** Nothing to plan until a new segment starts (or ever, once abandoned). */
  pause(): void {
    this.seg = undefined;
  }

  finish(): void {
    this.seg = undefined;
    this.finished = true;
  }

  isLast(req: PageRequest, seg: Segment): boolean {
    return req.offset + req.limit >= seg.end;
  }

  next(): PageRequest | undefined {
    const seg = this.seg;
    if (!seg || this.nextOffset >= seg.end) return undefined;
    return { offset: this.nextOffset, limit: Math.min(this.limit, this.cap - this.nextOffset), range: seg.range };
  }
}

export function describeRange(range: BlockRange | undefined): string {
  return range ? `blocks ${range.from}-${range.to}` : 'the window';
}
