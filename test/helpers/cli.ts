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
