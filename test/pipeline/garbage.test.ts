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

  it('keeps what is still reachable', async () => {
    const kept = { payload: 'live' };
    const ref = new WeakRef(kept);
    await nextTask();
    collectGarbage();
    expect(ref.deref()).toBe(kept);
  });
});

describe('GarbagePacer', () => {
  it('collects once per threshold of bytes, counting from the last collection', () => {
    let collections = 0;
    const pacer = new GarbagePacer(100, () => collections++);
    pacer.add(60);
    expect(collections).toBe(0);
    pacer.add(40);
    expect(collections).toBe(1);
    pacer.add(99);
    expect(collections).toBe(1);
    // One large page crosses the threshold once: the count starts again after it, not carried over.
    pacer.add(250);
    expect(collections).toBe(2);
    pacer.add(99);
    expect(collections).toBe(2);
    pacer.add(0);
    expect(collections).toBe(2);
    pacer.add(1);
    expect(collections).toBe(3);
  });
});
