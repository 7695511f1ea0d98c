import { cp, mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryLake } from '../../src/cli/commands/query.js';
import { openLake } from '../../src/index.js';
import { loadJobFile } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { tempDir } from '../helpers/lake.js';
import { startWriter, writeJob } from './helpers.js';

/**
 * Readers during a commit (design §4): a catalog reader never errors and sees the lake either before the
 * commit or after it, never a part of it. The writer is held at each step (test hook) to look at it there.
 *
 * Only the writers the readers meet are child processes (a writer holding the catalog is another process); the
 * lakes they start from are built in this process, through the same code (what `chainlake run <job>` runs).
 */
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let base: string;
let before: string;
let after: string;

const SIGNATURE = 'SELECT count(*) AS n, count(DISTINCT transaction_hash) AS k, sum(block_number) AS s, count(DISTINCT _run_id) AS runs FROM transactions';
const signature = async (lake: string): Promise<string> => {
  const s = JSON.parse(await queryLake(lake, SIGNATURE, 'json')) as Record<string, unknown>;
  return `${String(s.n)}/${String(s.k)}/${String(s.s)}`;
};
const jobB = (lake: string) => writeJob(path.join(dir, `b-${path.basename(lake)}.json`), sim, lake, sim.examples.addresses.slice(1, 4));
/** `chainlake run <job>` in this process: its report's status ('complete' for a run that did everything). */
const runInProcess = async (job: string): Promise<string> => (await runJob(await loadJobFile(job, { CHAINLAKE_API_KEY: sim.apiKey }))).status;

beforeAll(async () => {
  sim = await startSimulator({ seed: 11 });
  ({ dir, cleanup } = await tempDir('chainlake-reader-'));
  base = path.join(dir, 'base');
  expect(await runInProcess(await writeJob(path.join(dir, 'a.json'), sim, base, sim.examples.addresses.slice(0, 2)))).toBe('complete');
  before = await signature(base);
  const ref = path.join(dir, 'ref');
  await cp(base, ref, { recursive: true });
  expect(await runInProcess(await jobB(ref))).toBe('complete');
  after = await signature(ref);
  expect(after).not.toBe(before);
}, 120_000);

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

/** True when DuckDB refuses to open the catalog because a writer holds it. */
async function catalogLocked(lake: string): Promise<boolean> {
  try {
    const i = await DuckDBInstance.create(path.join(lake, 'catalog.duckdb'), { access_mode: 'READ_ONLY' });
    i.closeSync();
    return false;
  } catch (e) {
    if (/lock/i.test((e as Error).message)) return true;
    throw e;
  }
}

describe("a killed writer's commit a reader cannot finish", () => {
  it('in a journal format of a newer chainlake: refused with a code and the fix, the lake left as it was', async () => {
    const lake = path.join(dir, 'future-journal');
    await cp(base, lake, { recursive: true });
    const run = path.join(lake, '_staging', '20991231T000000Z-future');
    await mkdir(run, { recursive: true });
    await writeFile(path.join(run, 'commit.json'), JSON.stringify({ format: 3, runId: 'future' }));
    await expect(openLake(lake)).rejects.toMatchObject({
      code: 'CHAINLAKE_FAILED',
      message: expect.stringContaining('a commit in a journal format this chainlake does not know (3)'),
      hint: expect.stringContaining('a newer chainlake decided it'),
    });
    await rm(path.join(run), { recursive: true });
    expect(await signature(lake)).toBe(before);
  });
});

describe('a reader during a commit', () => {
  // One writer held at each step of its commit in turn (a child process: the catalog it holds is another process's).
  // The writer holds the catalog from before its decision (the check that no other DuckLake writer changed its tables)
  // to the end of its catalog transaction.
  it('held at each step: before the decision readers see the lake before the commit; decided, new files in place or not, catalog not yet written (journal, rename, catalog), a reader waits, then sees the whole commit; after the catalog commit, readers see the whole commit', async () => {
    const lake = path.join(dir, 'held');
    await cp(base, lake, { recursive: true });
    const w = startWriter(['run', await jobB(lake), '-q'], { apiKey: sim.apiKey, hold: 'prepared,journal,rename,catalog,committed' });
    // Held before the decision, its files merged: readers see the lake before the commit.
    expect(await w.nextHeld()).toBe('prepared');
    expect(await catalogLocked(lake)).toBe(false);
    expect(await signature(lake)).toBe(before);
    w.release();
    // Decided: the writer holds the catalog exclusively across the swap, so no catalog reader can be mid-query; one
    // started at each step waits, and sees the whole commit.
    const readers: Promise<string>[] = [];
    for (const step of ['journal', 'rename', 'catalog'] as const) {
      expect(await w.nextHeld()).toBe(step);
      expect(await catalogLocked(lake), step).toBe(true);
      readers.push(signature(lake));
      w.release();
    }
    // Held after the catalog commit: readers already see the whole commit.
    expect(await w.nextHeld()).toBe('committed');
    expect(await signature(lake)).toBe(after);
    w.release();
    expect((await w.done).code).toBe(0);
    expect(await Promise.all(readers)).toEqual([after, after, after]);
  });

  it('a reader querying in a loop through a whole run never errors and never sees a partial commit', async () => {
    const lake = path.join(dir, 'loop');
    await cp(base, lake, { recursive: true });
    const w = startWriter(['run', await jobB(lake), '-q'], { apiKey: sim.apiKey });
    w.child.stdin!.end();
    let finished = false;
    void w.done.then(() => (finished = true));
    const seen: string[] = [];
    for (let i = 0; i < 2000 && !finished; i++) seen.push(await signature(lake));
    expect((await w.done).code).toBe(0);
    seen.push(await signature(lake));
    expect(seen.length).toBeGreaterThan(1);
    expect(seen.filter((s) => s !== before && s !== after)).toEqual([]);
    expect(seen.at(-1)).toBe(after);
  });
});
