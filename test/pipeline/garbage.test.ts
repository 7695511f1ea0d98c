import { describe, expect, it } from 'vitest';
import { collectGarbage, GarbagePacer } from '../../src/pipeline/garbage.js';

/** A fresh object reachable only through the returned WeakRef (made in its own frame, so no local keeps it). */
function unreachable(): WeakRef<object> {
  return new WeakRef({ payload: new Array(1000).fill('garbage') });
}

/** A macrotask: a WeakRef's target is kept alive until the job that created or read it has ended. */
const nextTask = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('collectGarbage', () => {
  it('collects an unreachable object at once, without exposing gc to the program', async () => {
    const ref = unreachable();
    await nextTask();
    collectGarbage();
    expect(ref.deref()).toBeUndefined();
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
  });
});

describe('GarbagePacer', () => {
  it('collects once per threshold of bytes, counting from the last collection', () => {
    let collections = 0;
    const pacer = new GarbagePacer(100, () => collections++);
    // [bytes added, collections after it]: one large page crosses the threshold once, and the count starts
    // again after it, not carried over.
    const steps: [number, number][] = [
      [60, 0],
      [40, 1],
      [99, 1],
      [250, 2],
      [99, 2],
      [0, 2],
      [1, 3],
    ];
    for (const [bytes, expected] of steps) {
      pacer.add(bytes);
      expect(collections, `after adding ${bytes}`).toBe(expected);
    }
  });
});
