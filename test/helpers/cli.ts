import { spawn } from 'node:child_process';
import path from 'node:path';

export const CLI = path.resolve('dist/cli/main.js');

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs the built CLI as a user would, with a hard timeout so a hung child can never hang the suite. */
export function runCli(args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: opts.cwd,
      env: { ...process.env, CHAINLAKE_API_KEY: '', CHAINLAKE_MAINNET_URL: '', ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/**
 * Runs the CLI's parser in this process, as the bin does (src/cli/main.ts), capturing what it prints and the
 * exit code an error decides. For flags, help and usage errors: what a command itself writes to the process's
 * streams is not captured, and the process-wide settings of the bin (runtime tuning) are not applied.
 */
export async function runCliInProcess(args: string[]): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  // Loaded on first use: a test that only spawns the built CLI does not load the parser's sources.
  const { runCli: runParser } = await import('../../src/cli/cli.js');
  const code = await runParser(args, { out: (t) => (stdout += t), err: (t) => (stderr += t) });
  return { code: code ?? 0, signal: null, stdout, stderr };
}

/**
 * runCliInProcess, also capturing what the command itself writes to process.stdout and process.stderr (a query's
 * rows, a status, a compaction's summary) and the exit code it sets (process.exitCode, restored afterwards). For
 * commands whose output is the point but whose process (its start, signals, the bin's runtime tuning) is not.
 * The streams are the process's own: run no other test of the file concurrently with it. `env` is set in this
 * process's environment for the call and restored after (a child's environment, for commands run in process).
 */
export async function runCliCapturing(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  const savedEnv = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  try {
    return await capturing(args);
  } finally {
    for (const [k, v] of Object.entries(savedEnv)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

async function capturing(args: string[]): Promise<CliResult> {
  const streams = { stdout: process.stdout, stderr: process.stderr } as const;
  const written = { stdout: '', stderr: '' };
  const saved = { stdout: process.stdout.write, stderr: process.stderr.write };
  const savedExitCode = process.exitCode;
  for (const name of ['stdout', 'stderr'] as const) {
    streams[name].write = ((chunk: string | Uint8Array, encoding?: unknown, cb?: unknown) => {
      written[name] += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
      const done = typeof encoding === 'function' ? encoding : cb;
      if (typeof done === 'function') queueMicrotask(() => (done as () => void)());
      return true;
    }) as typeof process.stdout.write;
  }
  process.exitCode = undefined;
  try {
    const r = await runCliInProcess(args);
    const set = process.exitCode;
    return {
      ...r,
      code: r.code !== 0 ? r.code : typeof set === 'number' ? set : Number(set ?? 0),
      stdout: r.stdout + written.stdout,
      stderr: r.stderr + written.stderr,
    };
  } finally {
    process.stdout.write = saved.stdout;
    process.stderr.write = saved.stderr;
    process.exitCode = savedExitCode;
  }
}

/** Calls `onEvent` with each JSON log line a child writes (`--log-format json`); other lines are skipped. */
export function onJsonLines(stream: NodeJS.ReadableStream, onEvent: (ev: Record<string, unknown>) => void): void {
  let buf = '';
  stream.on('data', (d: Buffer) => {
    buf += d.toString();
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let ev: Record<string, unknown>;
      try {
        ev = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue;
      }
      onEvent(ev);
    }
  });
}
