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

/** Every test file (relative to the repository) that starts no process, needs no PostgreSQL and is no soak. */
export function fastTestFiles(root = '.'): string[] {
  const files = (readdirSync(path.join(root, 'test'), { recursive: true }) as string[])
    .map((f) => path.join('test', f))
    .filter((f) => f.endsWith('.test.ts'))
    .sort();
  return files.filter((f) => !needsProcess(f, readFileSync(path.join(root, f), 'utf8')));
}
