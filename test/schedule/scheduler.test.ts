import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CronSchedule } from '../../src/schedule/cron.js';
import { Scheduler, type SchedulerClock, type SchedulerEvent } from '../../src/schedule/scheduler.js';
import { CLI, onJsonLines } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

/** Virtual time: sleeping jumps straight to the deadline and fires whatever was due by then. */
class VirtualClock implements SchedulerClock {
  private t: number;
  private timers: { at: number; fire: () => void }[] = [];
  constructor(start: string) {
    this.t = Date.parse(start);
  }
  now(): Date {
    return new Date(this.t);
  }
  at(ms: number, fire: () => void): void {
    this.timers.push({ at: ms, fire });
  }
  async sleepUntil(until: Date, signal: AbortSignal): Promise<void> {
    // Time only moves once everything pending has settled, and then through each due timer in order.
    await settle();
    while (!signal.aborted) {
      const next = this.timers.filter((x) => x.at <= until.getTime()).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      this.timers.splice(this.timers.indexOf(next), 1);
      this.t = Math.max(this.t, next.at);
      next.fire();
      await settle();
    }
    if (!signal.aborted) this.t = Math.max(this.t, until.getTime());
  }
}

const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('scheduler (virtual clock)', () => {
  it('fires a job on its cron expression', async () => {
    const clock = new VirtualClock('2026-01-01T00:00:30Z');
    const started: string[] = [];
    const stop = new AbortController();
    const s = new Scheduler([{ file: 'a.json', schedule: new CronSchedule('*/10 * * * *') }], {
      clock,
      run: async () => 0,
      onEvent: (e) => {
        if (e.kind === 'started') started.push(e.at.toISOString());
        if (started.length === 3) stop.abort();
      },
    });
    await s.start(stop.signal);
    expect(started).toEqual(['2026-01-01T00:10:00.000Z', '2026-01-01T00:20:00.000Z', '2026-01-01T00:30:00.000Z']);
  });

  it('never overlaps a job with itself: a firing during a run is skipped', async () => {
    const clock = new VirtualClock('2026-01-01T00:00:00Z');
    const events: SchedulerEvent[] = [];
    const stop = new AbortController();
    const s = new Scheduler([{ file: 'slow.json', schedule: new CronSchedule('*/10 * * * *') }], {
      clock,
      // Each run takes 25 virtual minutes.
      run: () => new Promise((resolve) => clock.at(clock.now().getTime() + 25 * 60_000, () => resolve(0))),
      onEvent: (e) => {
        events.push(e);
        if (events.filter((x) => x.kind === 'finished').length === 2) stop.abort();
      },
    });
    await s.start(stop.signal);
    const log = events.filter((e) => e.kind !== 'scheduled').map((e) => `${e.kind}@${e.at.toISOString().slice(11, 16)}`);
    expect(log).toEqual([
      'started@00:10',
      'skipped@00:20',
      'skipped@00:30',
      'finished@00:35',
      'started@00:40',
      'skipped@00:50',
      'skipped@01:00',
      'finished@01:05',
    ]);
  });

  it('runs different jobs independently and reports exit codes', async () => {
    const clock = new VirtualClock('2026-01-01T00:00:00Z');
    const finished: string[] = [];
    const stop = new AbortController();
    const s = new Scheduler(
      [
        { file: 'hourly.json', schedule: new CronSchedule('0 * * * *') },
        { file: 'quarter.json', schedule: new CronSchedule('*/15 * * * *') },
      ],
      {
        clock,
        run: async (file) => (file === 'hourly.json' ? 1 : 0),
        onEvent: (e) => {
          if (e.kind === 'finished') finished.push(`${e.file}:${e.exitCode}@${e.at.toISOString().slice(11, 16)}`);
          if (finished.length === 5) stop.abort();
        },
      },
    );
    await s.start(stop.signal);
    expect(finished).toEqual(['quarter.json:0@00:15', 'quarter.json:0@00:30', 'quarter.json:0@00:45', 'hourly.json:1@01:00', 'quarter.json:0@01:00']);
  });
});

describe('chainlake schedule (real process, real clock)', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => ({ dir, cleanup } = await tempDir()));
  afterAll(async () => cleanup?.());

  it('runs a job on a per-second cron and stops cleanly on SIGTERM', async () => {
    const lake = path.join(dir, 'lake');
    const job = path.join(dir, 'job.json');
    await writeFile(
      job,
      JSON.stringify({
        name: 'every-second',
        target: 'simulator',
        lake,
        schedule: '* * * * * *',
        range: { fromBlock: 0, toBlock: 3000 },
        datasets: { transactions: { addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c'] } },
      }),
    );
    const child = spawn(process.execPath, [CLI, 'schedule', job, '--log-format', 'json'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const lines: Record<string, unknown>[] = [];
    const finished = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no run finished within 60 s: ${JSON.stringify(lines)}`)), 60_000);
      onJsonLines(child.stderr, (ev) => {
        lines.push(ev);
        if (ev.event === 'schedule.finish') {
          clearTimeout(timer);
          resolve(ev);
        }
      });
    });
    expect(finished.exitCode).toBe(0);
    const code = await new Promise<number | null>((resolve) => {
      child.on('close', resolve);
      child.kill('SIGTERM');
    });
    expect(code).toBe(0);
    expect(lines.some((l) => l.event === 'schedule.start')).toBe(true);
    const [runs] = await queryCatalog(lake, "SELECT count(*)::INT AS n FROM runs WHERE status = 'complete'");
    expect(runs!.n).toBeGreaterThanOrEqual(1);
  });
});
