import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/**
 * CLI and crash tests run the built `dist/` as a real user would; build it once per test run. Type errors
 * do not stop the emit (CI checks types separately with `npm run typecheck`), so one module's unfinished
 * types never hide every other test's result.
 */
export default function setup(): void {
  const r = spawnSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], { encoding: 'utf8' });
  if (r.status !== 0) process.stderr.write(`warning: tsc reported errors (tests run on what it emitted):\n${r.stdout}${r.stderr}\n`);
  if (!existsSync('dist/cli/main.js')) throw new Error('the build emitted no dist/cli/main.js');
}
