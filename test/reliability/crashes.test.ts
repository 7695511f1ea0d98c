import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATASETS } from '../../src/datasets/registry.js';
import { CLI } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { assertClean } from '../load/helpers.js';
import { describePrint, fingerprint } from './fingerprint.js';
import { demoDoc, SOAK, seeded, writeJobFile } from './helpers.js';

/**
 * SIGKILL at seeded random moments: one job (the demo job, committing in batches so kills land between,
 * inside and outside commits) is started again and again as a child process and killed at a random instant,
 * each kill followed by the next run of the same job, which recovers and resumes. The lake after the last,
 * uninterrupted run is identical to a clean run's, and between kills the lake never holds a duplicate.
 */
// CI kills a few times (each kill costs most of a run of the job), over the chain's first blocks only; the soak
// kills many more times, at more moments, over the whole chain. test/load/crash kills each commit phase on
// purpose; what this test adds is moments nobody chose, in a job of every dataset committing in batches.
const KILLS = SOAK ? 40 : 3;
/** The demo job's range in CI: every dataset, fewer chain rows (the snapshots are the same at any range). */
const CI_TO_BLOCK = 12_000;
const SEED = Number(process.env.CHAINLAKE_CRASH_SEED ?? 20260115);

let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => ({ dir, cleanup } = await tempDir('chainlake-kills-')));
afterAll(async () => cleanup?.());

async function job(name: string): Promise<string> {
  const doc = await demoDoc();
  doc.lake = path.join(dir, name);
  if (!SOAK) doc.range = { ...(doc.range as Record<string, unknown>), toBlock: CI_TO_BLOCK };
  // Several commits per run, so a kill can land before, between or inside them.
  doc.commit = { everyRows: 2000 };
  return writeJobFile(path.join(dir, `${name}.json`), doc);
}

interface Outcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  ms: number;
  stderr: string;
}

/** `chainlake run <job>`; SIGKILLed after `killAfterMs` unless it finishes first. Bounded by a hard timeout. */
function run(jobFile: string, killAfterMs?: number): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const child = spawn(process.execPath, [CLI, 'run', jobFile, '--log-format', 'json'], {
      env: { ...process.env, CHAINLAKE_API_KEY: '', CHAINLAKE_CATALOG_WAIT_MS: '30000' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));
    const kill = killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    const hard = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(kill);
      clearTimeout(hard);
      resolve({ code, signal, ms: Date.now() - t0, stderr });
    });
  });
}

const snapshotDatasets = Object.values(DATASETS)
  .filter((d) => d.partition === 'snapshot_date')
  .map((d) => d.name);
const today = () => new Date().toISOString().slice(0, 10);

describe('crashes', () => {
  it(
    `${KILLS} SIGKILLs at seeded random moments, each followed by a re-run: the final lake equals a clean run's`,
    async () => {
      const day = today();
      const cleanJob = await job('clean');
      const cleanRun = await run(cleanJob);
      expect(cleanRun.code, cleanRun.stderr).toBe(0);
      const clean = await fingerprint(path.join(dir, 'clean'));

      const jobFile = await job('killed');
      const lake = path.join(dir, 'killed');
      const random = seeded(SEED);
      const moments: number[] = [];
      let kills = 0;
      let completed = 0;
      const t0 = Date.now();
      // Bounded: a run that finishes before its kill moment is simply the next run's predecessor.
      for (let attempt = 0; kills < KILLS && attempt < KILLS * 4; attempt++) {
        // Within the first 80 % of a clean run: most moments land while the run still has work to lose.
        const at = Math.round(200 + random() * cleanRun.ms * 0.8);
        const r = await run(jobFile, at);
        if (r.signal === 'SIGKILL') {
          kills++;
          moments.push(at);
        } else {
          expect(r.code, r.stderr).toBe(0);
          completed++;
        }
        // Whatever the moment, every file is whole and holds one row per key.
        for (const [name, t] of Object.entries(await fingerprint(lake))) expect(t.keys, `${name} after a kill at ${at} ms`).toBe(t.rows);
      }
      expect(kills).toBe(KILLS);
      const last = await run(jobFile);
      expect(last.code, last.stderr).toBe(0);

      const final = await fingerprint(lake);
      if (today() === day) expect(final).toEqual(clean);
      else {
        // Snapshots are partitioned by the run's UTC date: across midnight only chain data can be compared.
        for (const ds of snapshotDatasets) (delete final[ds], delete clean[ds]);
        expect(final).toEqual(clean);
      }
      const files = (await queryCatalog(lake, 'SELECT path, rows::BIGINT AS rows, bytes::BIGINT AS bytes FROM files ORDER BY path')).map((f) => ({
        path: String(f.path),
        rows: Number(f.rows),
        bytes: Number(f.bytes),
      }));
      expect(await assertClean(lake, files)).toEqual([]);
      const runs = await queryCatalog(lake, 'SELECT status, count(*)::INT AS n FROM runs GROUP BY ALL ORDER BY ALL');
      expect(runs.find((r) => r.status === 'running')).toBeUndefined();
      console.log(
        `reliability/crashes: ${kills} SIGKILLs (seed ${SEED}, at ${moments.join(', ')} ms after start; ${completed} runs finished before their moment), ` +
          `then one run to the end: lake identical to a clean run's (${describePrint(clean)}); clean run ${(cleanRun.ms / 1000).toFixed(1)} s, ` +
          `kill loop ${((Date.now() - t0) / 1000).toFixed(1)} s; runs by status ${runs.map((r) => `${String(r.status)} ${String(r.n)}`).join(', ')}`,
      );
    },
    // Bounded by KILLS * 4 runs, each by its hard kill; generous for a shared machine with its cores kept busy.
    SOAK ? 1_800_000 : 900_000,
  );
});
