import { spawn } from 'node:child_process';
import { access, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, onJsonLines } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

// Issue 37: `chainlake schedule` chooses each job's lake by the rule every command has (lake-target.ts):
// --lake, else the job's "lake", else $CHAINLAKE_LAKE, else data/lake; it logs the choice and its runs write there.
let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => ({ dir, cleanup } = await tempDir()));
afterAll(async () => cleanup?.());

/** A six-field cron expression that fires once, `seconds` from now (then not again for a day). */
function onceIn(seconds: number): string {
  const t = new Date(Date.now() + seconds * 1000);
  return `${t.getUTCSeconds()} ${t.getUTCMinutes()} ${t.getUTCHours()} * * *`;
}

/** Runs `schedule` until `enough(events)` holds (bounded), then stops it with SIGTERM; its JSON events. */
async function scheduleUntil(
  args: string[],
  env: NodeJS.ProcessEnv,
  enough: (events: Record<string, unknown>[]) => boolean,
): Promise<Record<string, unknown>[]> {
  const child = spawn(process.execPath, [CLI, 'schedule', ...args, '--log-format', 'json'], {
    env: { ...process.env, CHAINLAKE_API_KEY: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const events: Record<string, unknown>[] = [];
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`schedule did not get there within 60 s:\n${stderr}`)), 60_000);
      void exited.then((code) => reject(new Error(`schedule exited (${code}) early:\n${stderr}`)));
      onJsonLines(child.stderr, (ev) => {
        events.push(ev);
        if (enough(events)) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
  return events;
}

describe('chainlake schedule: which lake', () => {
  it('a job without "lake" writes $CHAINLAKE_LAKE, a job with one writes its own, and --lake wins over both', async () => {
    const envLake = path.join(dir, 'env-lake');
    const ownLake = path.join(dir, 'own-lake');
    const cron = onceIn(6);
    const plain = path.join(dir, 'plain.json');
    await writeFile(plain, JSON.stringify({ name: 'plain', target: 'simulator', schedule: cron, datasets: { dashboard: {} } }));
    const own = path.join(dir, 'own.json');
    await writeFile(own, JSON.stringify({ name: 'own', target: 'simulator', lake: ownLake, schedule: cron, datasets: { dashboard: {} } }));

    const events = await scheduleUntil([plain, own], { CHAINLAKE_LAKE: envLake }, (evs) => evs.filter((e) => e.event === 'schedule.finish').length === 2);
    const chosen = events.filter((e) => e.event === 'schedule.job').map((e) => [path.basename(String(e.file)), e.lake, e.from]);
    expect(chosen).toEqual([
      ['plain.json', envLake, 'env'],
      ['own.json', ownLake, 'job'],
    ]);
    expect(events.find((e) => e.event === 'schedule.job')!.message).toBe(`${plain}: writes the local lake ${envLake} ($CHAINLAKE_LAKE)`);
    expect(events.filter((e) => e.event === 'schedule.finish').map((e) => e.exitCode)).toEqual([0, 0]);
    for (const [lake, job] of [
      [envLake, 'plain'],
      [ownLake, 'own'],
    ] as const) {
      const rows = await queryCatalog(lake, "SELECT job FROM runs WHERE status = 'complete'");
      expect(rows.map((r) => r.job)).toEqual([job]);
    }

    // --lake names the lake of every job given, over the job's own and the environment's.
    const flagLake = path.join(dir, 'flag-lake');
    const flagged = await scheduleUntil(
      ['--lake', flagLake, plain, own],
      { CHAINLAKE_LAKE: envLake },
      (evs) => evs.filter((e) => e.event === 'schedule.job').length === 2,
    );
    expect(flagged.filter((e) => e.event === 'schedule.job').map((e) => [e.lake, e.from])).toEqual([
      [flagLake, 'flag'],
      [flagLake, 'flag'],
    ]);
    await expect(access(path.join(flagLake, 'catalog.duckdb'))).rejects.toThrow(); // stopped before its runs fired
  }, 90_000);
});
