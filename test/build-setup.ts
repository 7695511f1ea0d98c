import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const STAMP = 'dist/.source-hash';

/** A hash of everything the build reads: the sources and the compiler settings. */
function sourceHash(): string {
  const h = createHash('sha256');
  const files = ['tsconfig.json', 'tsconfig.build.json', ...(readdirSync('src', { recursive: true }) as string[]).map((f) => path.join('src', f))];
  for (const f of files.filter((f) => /\.(ts|json)$/.test(f)).sort()) h.update(f).update('\0').update(readFileSync(f)).update('\0');
  return h.digest('hex');
}

/**
 * The process tier's files run the built `dist/` as a real user would (CLI children, writers, kills): build it once
 * per test run, unless it was built from exactly these sources already (a second run of the suite, as CI's on
 * another Node version). vitest runs a project's global setup only when it runs files of that project
 * (vitest.config.ts), so the fast tier, which imports the sources only, never waits for a build: in the inner loop
 * the sources have always changed, so every `npm run test:fast` paid for one (docs/performance.md, "The test
 * suite"). Type errors do not stop the emit (CI checks types separately with `npm run typecheck`), so one
 * module's unfinished types never hide every other test's result.
 */
export default function build(): void {
  // With the time of the build it describes: a build by other means since (npm run build from other sources)
  // changes that time, and the suite builds again.
  const stamp = () => `${sourceHash()} ${statSync('dist/cli/main.js').mtimeMs}`;
  if (existsSync('dist/cli/main.js') && existsSync(STAMP) && readFileSync(STAMP, 'utf8') === stamp()) return;
  const r = spawnSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], { encoding: 'utf8' });
  if (r.status !== 0) process.stderr.write(`warning: tsc reported errors (tests run on what it emitted):\n${r.stdout}${r.stderr}\n`);
  if (!existsSync('dist/cli/main.js')) throw new Error('the build emitted no dist/cli/main.js');
  removeOrphans();
  // Only a clean build is remembered: one with errors is built again next time, so its warning is seen again.
  if (r.status === 0) writeFileSync(STAMP, stamp());
}

/**
 * Removes what an earlier build emitted for a source since removed or moved (`npm run build` starts from an empty
 * dist/ instead): it would be shipped (test/pack). Not by emptying dist/ first: the other process-tier project's
 * files may already run the built CLI when its global setup builds again.
 */
function removeOrphans(): void {
  for (const f of readdirSync('dist', { recursive: true }) as string[]) {
    if (f.startsWith('bench-build') || !/\.(js|d\.ts|js\.map)$/.test(f)) continue;
    if (!existsSync(path.join('src', f.replace(/(\.d\.ts|\.js\.map|\.js)$/, '.ts')))) rmSync(path.join('dist', f), { force: true });
  }
}
