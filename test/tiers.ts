import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The fast tier runs its files one after another in the same fork (vitest.config.ts, isolate: false): a file there
 * restores whatever process-wide state it changes (environment, signal handlers) and mocks none of our modules.
 *
 * What makes a test file slow to run in the inner loop: a child process (the built CLI, a writer, a PostgreSQL
 * server, a kill), or the reliability soaks. Read from the file's own text, so that a new file lands in the right
 * tier without a list to keep.
 */
const NEEDS_PROCESS: readonly RegExp[] = [
  /from 'node:child_process'/,
  // helpers/cli.ts: runCli spawns the built CLI (runCliInProcess does not).
  /import \{[^}]*\brunCli\b[^}]*\} from '(\.\.\/)+helpers\/cli\.js'/,
  // load/helpers.ts: a CLI writer process.
  /\b(startWriter|runWriter)\b/,
  // ducklake/postgres.ts: a PostgreSQL server.
  /\bstartPostgres\b/,
  // helpers/permissions.ts: a probe process as the unprivileged user.
  /\bunprivilegedCanRun\b/,
];

/** The reliability suites are soaks (npm run test:soak runs them longer): never in the fast tier. */
const SOAK_DIR = 'test/reliability/';

export function needsProcess(file: string, text: string): boolean {
  return file.split(path.sep).join('/').startsWith(SOAK_DIR) || NEEDS_PROCESS.some((re) => re.test(text));
}

/**
 * What a process-tier file may do only in a fork of its own: change the process's environment, signal handlers,
 * working directory or exit code, mock a module, or apply the CLI's runtime tuning. The other process-tier files
 * (they start children or use PostgreSQL, and leave the process as they found it) run one after another in shared
 * forks, as the fast tier's do: a fresh fork and its imports are paid per file, not per fork (docs/performance.md,
 * "The test suite").
 */
const CHANGES_PROCESS: readonly RegExp[] = [
  /process\.env(\.\w+|\[[^\]]+\])?\s*=(?!=)/,
  /Object\.assign\(process\.env/,
  /delete process\.env/,
  /process\.(on|once|addListener|prependListener|removeAllListeners)\(/,
  /process\.chdir\(/,
  /process\.exitCode\s*=(?!=)/,
  /\bvi\.(mock|doMock|stubEnv|stubGlobal)\(/,
  // The CLI's runtime tuning applies itself when imported (V8 flags, DuckDB's allocator variable, a collector).
  /src\/cli\/(runtime-tuning|main)\.js'/,
  /\bsetGarbageCollector\(/,
];

/**
 * A process-tier file that needs a fork of its own: one that changes the process (see CHANGES_PROCESS). A soak is
 * long, not different: its children and servers end with it, as any file's do.
 */
export function needsOwnFork(_file: string, text: string): boolean {
  return CHANGES_PROCESS.some((re) => re.test(text));
}

function testFiles(root: string): { file: string; text: string }[] {
  return (readdirSync(path.join(root, 'test'), { recursive: true }) as string[])
    .map((f) => path.join('test', f))
    .filter((f) => f.endsWith('.test.ts'))
    .sort()
    .map((file) => ({ file, text: readFileSync(path.join(root, file), 'utf8') }));
}

/** Every test file (relative to the repository) that starts no process, needs no PostgreSQL and is no soak. */
export function fastTestFiles(root = '.'): string[] {
  return testFiles(root)
    .filter(({ file, text }) => !needsProcess(file, text))
    .map(({ file }) => file);
}

/** The process tier's files that leave the process as they found it: they share forks (see CHANGES_PROCESS). */
export function sharedProcessTestFiles(root = '.'): string[] {
  return testFiles(root)
    .filter(({ file, text }) => needsProcess(file, text) && !needsOwnFork(file, text))
    .map(({ file }) => file);
}
