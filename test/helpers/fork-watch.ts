/**
 * Says why a test fork ended when vitest did not end it. vitest reports such a fork only as "Worker exited
 * unexpectedly", without the file it ran, its exit code or the signal that ended it, and without those a rare
 * crash in CI cannot be told apart from a kill. The main process (globalSetup) watches its forks; each fork
 * (setupFiles) notes the files it runs and, if it calls exit, where from. At the end of the run the teardown
 * prints what it knows about every fork that ended on its own.
 */
import { ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ENV = 'CHAINLAKE_TEST_FORK_LOG';

/** In vitest's main process: returns the teardown that prints the forks that ended unasked. */
export function watchForks(): () => void {
  const log = path.join(os.tmpdir(), `chainlake-vitest-forks-${process.pid}.log`);
  rmSync(log, { force: true });
  process.env[ENV] = log;
  const stopping = new WeakSet<ChildProcess>();
  const ended: string[] = [];
  const isFork = (c: ChildProcess) => c.spawnargs.some((a) => a.endsWith(path.join('workers', 'forks.js')));
  const kill = ChildProcess.prototype.kill;
  const emit = ChildProcess.prototype.emit;
  ChildProcess.prototype.kill = function (this: ChildProcess, ...args: Parameters<ChildProcess['kill']>) {
    stopping.add(this);
    return kill.apply(this, args);
  };
  ChildProcess.prototype.emit = function (this: ChildProcess, event: string | symbol, ...args: unknown[]) {
    if (event === 'exit' && !stopping.has(this) && isFork(this)) {
      const [code, signal] = args as [number | null, NodeJS.Signals | null];
      ended.push(`test fork ${this.pid} ended at ${new Date().toISOString()} with ${signal ? `signal ${signal}` : `exit code ${code}`}`);
    }
    return (emit as (this: ChildProcess, event: string | symbol, ...args: unknown[]) => boolean).call(this, event, ...args);
  } as ChildProcess['emit'];
  return () => {
    ChildProcess.prototype.kill = kill;
    ChildProcess.prototype.emit = emit;
    const notes = existsSync(log) ? readFileSync(log, 'utf8').split('\n') : [];
    rmSync(log, { force: true });
    for (const line of ended) {
      const pid = /test fork (\d+)/.exec(line)![1]!;
      const mine = notes.filter((n) => n.startsWith(`${pid} `)).map((n) => n.slice(pid.length + 1));
      process.stderr.write(`${line}; it ran: ${mine.join(' | ') || '(no note)'}\n`);
    }
  };
}

/** In a test fork (setupFiles): notes the file it runs, and any exit it makes itself, with where it came from. */
export function noteFork(file: string): void {
  const log = process.env[ENV];
  if (!log) return;
  appendFileSync(log, `${process.pid} ${path.relative(process.cwd(), file)}\n`);
  const g = globalThis as { __chainlakeForkNoted?: boolean };
  if (g.__chainlakeForkNoted) return;
  g.__chainlakeForkNoted = true;
  process.on('exit', (code) => {
    const where = (new Error().stack ?? '')
      .split('\n')
      .slice(2, 8)
      .map((l) => l.trim())
      .join(' < ');
    appendFileSync(log, `${process.pid} exit(${code}) called: ${where}\n`);
  });
}
