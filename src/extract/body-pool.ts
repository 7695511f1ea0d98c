import type { RawPage } from './page.js';

/**
 * Response bodies read into buffers that are used again once their page is staged.
 *
 * A page's body lives from its first byte until staging has written it: long enough to outlive V8's young
 * generation, so a fresh buffer per page waited for a full collection to be freed, and dead bodies piled up
 * beside the heap unless the run forced a full collection every few megabytes of bodies. A body read into a
 * pooled buffer leaves nothing behind when it is given back (`releaseBody`). A body that is never given back (a
 * failed attempt, a page read by anything but staging) is freed by V8 as any buffer is.
 *
 * One pool per process: bodies are what the process holds, whatever the run. `drainBodyPool` drops the spare
 * buffers when no run receives bodies any more.
 */

/** The smallest buffer lent; a body outgrowing its buffer moves into one of at least twice the size. */
const MIN_BYTES = 64 * 1024;

/**
 * Spare buffers kept at most, in bytes. The pool holds what the most bodies in flight at once needed (pages
 * prefetched, pages queued for staging); beyond this, a buffer given back is left to V8.
 */
export const BODY_POOL_KEEP_BYTES = 32 * 1024 * 1024;

/**
 * The bodies lent and not given back, each with its buffer. Keyed by the body itself (the view readBody
 * returned), so that a body is given back once, and a stale body whose buffer another body holds now never is.
 */
const lent = new WeakMap<Buffer, ArrayBuffer>();
/** Spare buffers by size (powers of two from MIN_BYTES). */
const spare = new Map<number, ArrayBuffer[]>();
let keptBytes = 0;

/** What the pool did since the process started (tests and benchmarks read it). */
export const bodyPoolStats = { lent: 0, reused: 0 };

function sizeFor(bytes: number): number {
  let size = MIN_BYTES;
  while (size < bytes) size *= 2;
  return size;
}

/** A buffer of at least `bytes` bytes: a spare one if there is one of its size. */
function take(bytes: number): ArrayBuffer {
  const size = sizeFor(bytes);
  const ab = spare.get(size)?.pop();
  if (!ab) return new ArrayBuffer(size);
  keptBytes -= size;
  bodyPoolStats.reused++;
  return ab;
}

/** Keeps a buffer no body holds any more for the next body, within BODY_POOL_KEEP_BYTES. */
function keep(ab: ArrayBuffer): void {
  if (keptBytes + ab.byteLength > BODY_POOL_KEEP_BYTES) return;
  keptBytes += ab.byteLength;
  let list = spare.get(ab.byteLength);
  if (!list) spare.set(ab.byteLength, (list = []));
  list.push(ab);
}

/**
 * The largest buffer a Content-Length alone makes the pool take before a byte came: a header claiming more (a
 * broken or hostile server) must not allocate it; a body that large still grows into what it needs.
 */
const MAX_EXPECTED_BYTES = 16 * 1024 * 1024;

/**
 * Reads a response body whole into a pooled buffer; `expected` (its Content-Length, when sent) sizes the buffer
 * at once, up to MAX_EXPECTED_BYTES. The returned bytes are a view of that buffer, theirs until `releaseBody` (or for good, if never).
 */
export async function readBody(body: AsyncIterable<Buffer>, expected: number | undefined): Promise<Buffer> {
  let ab = take(expected !== undefined && expected > 0 ? Math.min(expected, MAX_EXPECTED_BYTES) : MIN_BYTES);
  let buf = Buffer.from(ab);
  let n = 0;
  for await (const chunk of body) {
    if (n + chunk.length > buf.length) {
      const bigger = take(2 * (n + chunk.length));
      buf.copy(Buffer.from(bigger), 0, 0, n);
      keep(ab);
      ab = bigger;
      buf = Buffer.from(ab);
    }
    chunk.copy(buf, n);
    n += chunk.length;
  }
  const bytes = buf.subarray(0, n);
  lent.set(bytes, ab);
  bodyPoolStats.lent++;
  return bytes;
}

/**
 * Gives a page's body back to the pool: only when nothing will read it again (staging has written it). Its
 * scanned list is retired first, so that a reader that still held the page fails loudly instead of reading the
 * next body that fills the buffer.
 */
export function releaseBody(raw: RawPage): void {
  const ab = lent.get(raw.bytes);
  if (!ab) return;
  lent.delete(raw.bytes);
  raw.list?.retire();
  keep(ab);
}

/** Drops the spare buffers, for V8 to free: called when no run receives bodies any more. */
export function drainBodyPool(): void {
  spare.clear();
  keptBytes = 0;
}
