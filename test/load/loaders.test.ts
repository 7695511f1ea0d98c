import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Loaders } from '../../src/load/write/batch-rows.js';

/** The loader connections: work spread over both, narrowed to one or held (after what runs has ended) while a commit merges. */
let instance: DuckDBInstance;
let conns: DuckDBConnection[];

beforeAll(async () => {
  instance = await DuckDBInstance.create(':memory:');
  conns = [await instance.connect(), await instance.connect()];
});

afterAll(() => {
  instance?.closeSync();
});

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('Loaders', () => {
  it('spreads typings over the connections; narrowed to one, new ones go to the first once the other is idle', async () => {
    const loaders = new Loaders(conns.map((c) => Promise.resolve(c)));
    const ran: number[] = [];
    const gates = [deferred(), deferred()];
    const first = loaders.run(async (c) => {
      ran.push(conns.indexOf(c));
      await gates[0]!.promise;
    });
    const second = loaders.run(async (c) => {
      ran.push(conns.indexOf(c));
      await gates[1]!.promise;
    });
    // Both started at once, one per connection.
    await new Promise((r) => setImmediate(r));
    expect(ran.sort()).toEqual([0, 1]);

    let narrowed = false;
    const narrowing = loaders.hold(1).then(() => (narrowed = true));
    gates[0]!.resolve();
    await first;
    await new Promise((r) => setImmediate(r));
    expect(narrowed).toBe(false); // the second connection is still busy
    gates[1]!.resolve();
    await second;
    await narrowing;
    expect(narrowed).toBe(true);

    const whileNarrowed: number[] = [];
    await Promise.all([1, 2, 3].map(() => loaders.run(async (c) => void whileNarrowed.push(conns.indexOf(c)))));
    expect(whileNarrowed).toEqual([0, 0, 0]);

    loaders.release();
    const slow = deferred();
    const held = loaders.run(async () => slow.promise);
    const other: number[] = [];
    await loaders.run(async (c) => void other.push(conns.indexOf(c)));
    expect(other).toEqual([1]); // the first is busy, so the second takes it
    slow.resolve();
    await held;
  });

  it('held at none: waits for the running typings and holds new ones until released', async () => {
    const loaders = new Loaders(conns.map((c) => Promise.resolve(c)));
    const gate = deferred();
    const running = loaders.run(async () => gate.promise);
    await new Promise((r) => setImmediate(r));

    let holding = false;
    const hold = loaders.hold(0).then(() => (holding = true));
    let held = false;
    const heldBack = loaders.run(async () => void (held = true));
    await new Promise((r) => setImmediate(r));
    expect(holding).toBe(false); // a typing still runs
    gate.resolve();
    await running;
    await hold;
    await new Promise((r) => setImmediate(r));
    expect(held).toBe(false); // queued during the hold: not started

    loaders.release();
    await heldBack;
    expect(held).toBe(true);

    // A hold begun in the same turn as a release still applies to what waited: it starts at the next release.
    await loaders.hold(0);
    let late = false;
    const lateRun = loaders.run(async () => void (late = true));
    loaders.release();
    await loaders.hold(0);
    await new Promise((r) => setImmediate(r));
    expect(late).toBe(false);
    loaders.release();
    await lateRun;
    expect(late).toBe(true);
  });

  it('a failed typing does not stop the queue of its connection', async () => {
    const loaders = new Loaders([Promise.resolve(conns[0]!)]);
    await expect(loaders.run(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    let ran = false;
    await loaders.run(async (c) => {
      await c.run('SELECT 1');
      ran = true;
    });
    expect(ran).toBe(true);
  });
});
