import { existsSync } from 'node:fs';
import { cp, rm } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryLake } from '../../src/cli/commands/query.js';
import { COMMIT_STEPS } from '../../src/load/test-hooks.js';
import { loadJobFile } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { REFERENCE_DIR, withReference } from '../ducklake/helpers.js';
import { runCliInProcess } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { assertClean, catalogFiles, lakeContent, runWriter, writeJob } from './helpers.js';

/**
 * Crash safety (design §4): a writer SIGKILLed at any step of the commit protocol leaves a lake that the
 * next run turns into exactly the lake of an uninterrupted run — same rows per key, no duplicate, no
 * orphan file — and the catalog agrees with the disk.
 *
 * Only the killed writer is a child process (the kill is the point); the runs, readers and status that find
 * what it left run in this process, through the same code (runJob recovers the lake first, as `chainlake run`
 * does).
 */
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let apiKey: string;
let base: string;
let reference: Awaited<ReturnType<typeof lakeContent>>;
/** Job B killed at 'rename' over job A's lake, never opened: each test that starts there recovers a copy. */
let killedAtRename: string;

// Job A then job B, overlapping on one address: B's commit rewrites partitions that already hold A's rows.
const jobA = (lake: string) => writeJob(path.join(dir, `a-${path.basename(lake)}.json`), sim, lake, sim.examples.addresses.slice(0, 2));
// (The job's name is its file's unless given: a copy of a killed lake is run under the killed run's job.)
const jobB = (lake: string, name = `b-${path.basename(lake)}`) =>
  writeJob(path.join(dir, `b-${path.basename(lake)}.json`), sim, lake, sim.examples.addresses.slice(1, 4), { name });
/** `chainlake run <job>` in this process: its report's status ('complete' for a run that did everything). */
const runInProcess = async (job: string): Promise<string> => (await runJob(await loadJobFile(job, { CHAINLAKE_API_KEY: apiKey }))).status;

beforeAll(async () => {
  sim = await startSimulator({ seed: 11 });
  apiKey = sim.apiKey;
  ({ dir, cleanup } = await tempDir('chainlake-crash-'));
  const ref = path.join(dir, 'reference');
  expect(await runInProcess(await jobA(ref))).toBe('complete');
  // The lake after job A is each test's starting point: a copy, before job B goes into the reference.
  base = path.join(dir, 'base');
  await cp(ref, base, { recursive: true });
  expect(await runInProcess(await jobB(ref))).toBe('complete');
  reference = await lakeContent(ref);
  expect(reference.transactions!.rows).toBeGreaterThan(100);
  expect(reference.transactions!.duplicates).toBe(0);
  expect(await assertClean(ref, await catalogFiles(ref))).toEqual([]);
  // One kill between renames serves the three tests that recover from it (by a run, by a kill during that
  // recovery, by a reader): each gets a copy, as the lake moves with its journal (paths relative to its root).
  killedAtRename = path.join(dir, 'killed-rename');
  await cp(base, killedAtRename, { recursive: true });
  expect((await runWriter(['run', await jobB(killedAtRename), '-q'], { apiKey, crash: 'rename' })).signal).toBe('SIGKILL');
}, 120_000);

/** A copy of the lake job B was killed in at 'rename', and job B's file for it (the killed run's job). */
async function copyKilledAtRename(name: string): Promise<{ lake: string; job: string }> {
  const lake = path.join(dir, name);
  await cp(killedAtRename, lake, { recursive: true });
  return { lake, job: await jobB(lake, `b-${path.basename(killedAtRename)}`) };
}

/**
 * Job B run alone into a fresh lake (built on first use, then only read): what a lake whose first run is job B holds,
 * however its commits were batched.
 */
let freshB: Promise<Awaited<ReturnType<typeof lakeContent>>> | undefined;
const freshLakeB = (): Promise<Awaited<ReturnType<typeof lakeContent>>> =>
  (freshB ??= (async () => {
    const lake = path.join(dir, 'fresh-b');
    expect(await runInProcess(await jobB(lake))).toBe('complete');
    freshBLake = lake;
    return lakeContent(lake);
  })());
let freshBLake: string;

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

/**
 * One kill point per phase of the protocol, each a different recovery path (src/load/write/recovery.ts):
 * before the decision (no journal: the run is abandoned, its staging removed; 'final' leaves the most in
 * staging: staged rows, typed and merged files), decided and half applied (the journal is replayed; 'rename'
 * leaves some files moved and some not, so the replay meets both; 'journal' and 'catalog' are its ends),
 * and applied with the journal left (already recorded: nothing is applied twice). Killing at the other steps
 * takes the same paths; test/reliability/crashes.test.ts kills runs at random moments.
 */
const KILL_POINTS: readonly (typeof COMMIT_STEPS)[number][] = ['final', 'rename', 'committed'];

describe('a writer killed at each phase of the commit protocol', () => {
  for (const step of KILL_POINTS) {
    it(`killed at '${step}': the next run yields the uninterrupted lake`, async () => {
      let lake = path.join(dir, `crash-${step}`);
      let job: string;
      if (step === 'rename') ({ lake, job } = await copyKilledAtRename(`crash-${step}`));
      else {
        await cp(base, lake, { recursive: true });
        job = await jobB(lake);
        const killed = await runWriter(['run', job, '-q'], { apiKey, crash: step });
        expect(killed.signal).toBe('SIGKILL');
      }

      // Until the next command, the files are whole and hold one row per key, whatever the step.
      const between = await lakeContent(lake);
      expect(between.transactions!.duplicates).toBe(0);

      expect(await runInProcess(job)).toBe('complete');
      expect(await lakeContent(lake)).toEqual(reference);
      expect(await assertClean(lake, await catalogFiles(lake))).toEqual([]);

      const [view] = await queryCatalog(lake, 'SELECT count(*)::BIGINT AS n, count(DISTINCT transaction_hash)::BIGINT AS k FROM transactions');
      expect(Number(view!.n)).toBe(reference.transactions!.rows);
      expect(Number(view!.k)).toBe(reference.transactions!.rows);

      // The killed run is accounted for, once: killed before the decision it is abandoned (and its rows were
      // fetched again); after it, a later command finished its commit — or found it already recorded.
      const at = COMMIT_STEPS.indexOf(step);
      const recovered = await queryCatalog(lake, `SELECT run_id FROM commits WHERE recovered_by IS NOT NULL`);
      const runs = await queryCatalog(lake, `SELECT run_id, status FROM runs ORDER BY started_at`);
      const windows = await queryCatalog(lake, `SELECT run_id, count(*)::BIGINT AS n FROM windows GROUP BY run_id`);
      expect(windows.every((w) => Number(w.n) === 2 || Number(w.n) === 3)).toBe(true);
      if (at < COMMIT_STEPS.indexOf('journal')) {
        expect(recovered).toHaveLength(0);
        expect(runs.map((r) => r.status)).toEqual(['complete', 'abandoned', 'complete']);
      } else if (step !== 'committed') {
        expect(recovered).toHaveLength(1);
        expect(runs.map((r) => r.status)).toEqual(['complete', 'complete', 'complete']);
      } else {
        expect(recovered).toHaveLength(0);
        expect(runs.map((r) => r.status)).toEqual(['complete', 'complete', 'complete']);
      }
    });
  }

  it('a kill during recovery itself is recovered by the next command', async () => {
    const { lake, job } = await copyKilledAtRename('crash-twice');
    // The next run finishes the dead commit first (renaming what is left) and is killed right there.
    expect((await runWriter(['run', job, '-q'], { apiKey, crash: 'rename' })).signal).toBe('SIGKILL');
    expect(await runInProcess(job)).toBe('complete');
    expect(await lakeContent(lake)).toEqual(reference);
    expect(await assertClean(lake, await catalogFiles(lake))).toEqual([]);
  });

  it("a lake's very first run killed mid-commit (no catalog yet) is finished by `chainlake status`", async () => {
    const lake = path.join(dir, 'crash-first');
    const ref = await freshLakeB();
    expect((await runWriter(['run', await jobB(lake), '-q'], { apiKey, crash: 'rename' })).signal).toBe('SIGKILL');
    // The status command as the bin runs it (its table goes to this process's stdout).
    const s = await runCliInProcess(['status', '--lake', lake, '--runs', '1']);
    expect(s.code, s.stderr).toBe(0);
    expect(await lakeContent(lake)).toEqual(ref);
    expect(await runInProcess(await jobB(lake))).toBe('complete');
    expect(await lakeContent(lake)).toEqual(ref);
    expect(await assertClean(lake, await catalogFiles(lake))).toEqual([]);
  });

  it('a reader finishes a dead commit on its own: query after a kill between renames sees the whole commit', async () => {
    const { lake } = await copyKilledAtRename('crash-query');
    // What `chainlake query --lake <lake> --format json` runs, its output caught here.
    const q = await queryLake(lake, 'SELECT count(*) AS n FROM transactions', 'json');
    expect(Number((JSON.parse(q) as { n: number }).n)).toBe(reference.transactions!.rows);
    // No refetch was needed: the decided commit was B's, applied whole.
    expect(await lakeContent(lake)).toEqual(reference);
    expect(await assertClean(lake, await catalogFiles(lake))).toEqual([]);
  });
});

const HAS_REF = existsSync(path.join(REFERENCE_DIR, 'ducklake.duckdb_extension'));

describe.skipIf(!HAS_REF)('a killed run and another DuckLake writer', () => {
  it('a run killed after a commit, its staging lost, does not block re-creating a table another writer dropped: recovery settles it as abandoned', async () => {
    // Job B in batches of a window each, so the run is killed with windows committed and others not.
    const batched = (lake: string) =>
      writeJob(path.join(dir, `batched-${path.basename(lake)}.json`), sim, lake, sim.examples.addresses.slice(1, 4), { commit: { everyRows: 1 } });
    // Fresh lakes: the table made again holds what this job fetches, not job A's rows of the lake it was dropped from
    // (job B's rows, however its commits were batched).
    const clean = await freshLakeB();

    const lake = path.join(dir, 'dropped-killed');
    const job = await batched(lake);
    expect((await runWriter(['run', job, '-q'], { apiKey, crash: 'committed' })).signal).toBe('SIGKILL');
    const running = await queryCatalog(lake, `SELECT run_id FROM runs WHERE status = 'running'`);
    expect(running).toHaveLength(1);
    const killed = String(running[0]!.run_id);
    expect(await queryCatalog(lake, `SELECT count(*)::BIGINT AS n FROM windows WHERE run_id = '${killed}' AND status = 'committed'`)).toEqual([{ n: 1n }]);
    // What a lost machine loses: the run's staging (its journal, applied already, and its quota reservations). Then a
    // user's DuckDB drops the table.
    await rm(path.join(lake, '_staging'), { recursive: true, force: true });
    await withReference(path.join(lake, 'catalog.duckdb'), ['DROP TABLE lake.transactions'], { as: 'lake' });

    const report = await runJob(await loadJobFile(job, { CHAINLAKE_API_KEY: apiKey }));
    expect(report.status).toBe('complete');
    expect(report.voided?.map((v) => v.dataset)).toEqual(['transactions']);
    // Over, as the recovery records a run killed with its staging: abandoned.
    expect(await queryCatalog(lake, `SELECT status FROM runs WHERE run_id = '${killed}'`)).toEqual([{ status: 'abandoned' }]);
    expect(await lakeContent(lake)).toEqual(clean);
    expect(await assertClean(lake, await catalogFiles(lake))).toEqual([]);
    // And as the reference reads it: every row a clean run wrote, by key.
    const keys = (l: string) =>
      withReference(path.join(l, 'catalog.duckdb'), ['SELECT transaction_hash, block_number FROM lake.transactions ORDER BY ALL'], { as: 'lake' });
    expect(await keys(lake)).toEqual(await keys(freshBLake));
  });
});
