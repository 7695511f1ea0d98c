import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Loaders } from '../../src/load/batch-rows.js';

/** The loader connections: work spread over both, paused (after what runs has ended) while a commit merges. */
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
  it('spreads typings over the connections; a pause waits for the started ones and holds new ones until resumed', async () => {
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

    let paused = false;
    const pausing = loaders.pause().then(() => (paused = true));
    let held = false;
    const heldBack = loaders.run(async () => void (held = true));
    gates[0]!.resolve();
    await first;
    await new Promise((r) => setImmediate(r));
    expect(paused).toBe(false); // the second connection is still busy
    gates[1]!.resolve();
    await second;
    await pausing;
    expect(paused).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(held).toBe(false); // queued during the pause: not started

    loaders.resume();
    await heldBack;
    expect(held).toBe(true);

    // A pause begun in the same turn as a resume still holds what waited: it starts at the next resume.
    await loaders.pause();
    let late = false;
    const lateRun = loaders.run(async () => void (late = true));
    loaders.resume();
    await loaders.pause();
    await new Promise((r) => setImmediate(r));
    expect(late).toBe(false);
    loaders.resume();
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
