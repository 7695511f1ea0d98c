/** Takes bytes to write; resolves once it is done with them, after which their buffer may be written over. */
export type ByteWriter = (bytes: Uint8Array) => Promise<void>;

/**
 * Output gathered into a few buffers that are used over and over, for writing a result of any size: a buffer
 * goes to the writer once it holds `slotBytes`, and is filled again once the writer is done with it. Text built
 * and handed over piece by piece (a string per chunk of rows, a Buffer per write) outlives V8's young-generation
 * collections while it waits to be written, is promoted and stays, with the native memory behind it, until a
 * full collection: a long result's memory grew with it. The ring's buffers are the same from the first row to
 * the last, and the writer can write one while the next fills.
 */
export class ByteRing {
  private readonly slots: Buffer[] = [];
  private readonly pending: (Promise<void> | undefined)[] = [];
  private slot = 0;
  private pos = 0;

  constructor(
    private readonly write: ByteWriter,
    private readonly slotBytes = 256 * 1024,
    count = 3,
  ) {
    // Room past the threshold, so that a row started below it rarely has to grow its buffer.
    for (let i = 0; i < count; i++) this.slots.push(Buffer.allocUnsafe(slotBytes + 64 * 1024));
  }

  /** Whether the current buffer is due to be written (see flush). */
  get full(): boolean {
    return this.pos >= this.slotBytes;
  }

  /** The current buffer, with room for `n` more bytes (grown for a piece larger than the room left). */
  private room(n: number): Buffer {
    const buf = this.slots[this.slot]!;
    if (this.pos + n <= buf.length) return buf;
    const grown = Buffer.allocUnsafe(Math.max(buf.length * 2, this.pos + n));
    buf.copy(grown, 0, 0, this.pos);
    this.slots[this.slot] = grown;
    return grown;
  }

  /** Appends a string as UTF-8. */
  text(s: string): void {
    const buf = this.room(s.length * 3);
    this.pos += buf.write(s, this.pos);
  }

  bytes(b: Uint8Array): void {
    this.room(b.length).set(b, this.pos);
    this.pos += b.length;
  }

  byte(b: number): void {
    this.room(1)[this.pos++] = b;
  }

  /** Hands the current buffer to the writer when it is full (or, with `force`, whenever it holds bytes), then waits until the next one is free. */
  async flush(force = false): Promise<void> {
    if (this.pos === 0 || (!force && !this.full)) return;
    this.pending[this.slot] = this.write(this.slots[this.slot]!.subarray(0, this.pos));
    this.slot = (this.slot + 1) % this.slots.length;
    this.pos = 0;
    const busy = this.pending[this.slot];
    this.pending[this.slot] = undefined;
    await busy;
  }

  /** Writes what is left and waits until the writer is done with every buffer. */
  async end(): Promise<void> {
    await this.flush(true);
    await Promise.all(this.pending);
    this.pending.fill(undefined);
  }
}
