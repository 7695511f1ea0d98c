import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fastTestFiles, needsOwnFork, needsProcess, sharedProcessTestFiles } from './tiers.js';

// The tier is read from a file's text: this file spells the names it checks with a '~' inside, so that its own
// text does not read as a file that starts processes.
const t = (s: string): string => s.replaceAll('~', '');

describe('the fast tier (npm run test:fast)', () => {
  it('leaves out a file that spawns the CLI, a writer, PostgreSQL or a probe, however its import is written', () => {
    const spawning = [
      t(`import { run~Cli } from '../helpers/cli.js';`),
      t(`import {\n  CLI,\n  run~Cli,\n  runCliInProcess,\n} from '../helpers/cli.js';`),
      t(`import { spawn } from 'node:child~_process';`),
      t(`import { run~Writer, withDuck } from './helpers.js';`),
      t(`import { start~Postgres, type TestPostgres } from '../ducklake/postgres.js';`),
      t(`import { unprivileged, unprivileged~CanRun } from '../helpers/permissions.js';`),
    ];
    for (const text of spawning) expect(needsProcess('test/x/a.test.ts', text), text).toBe(true);
  });

  it('keeps a file that runs the parser in this process, and leaves out the soaks whatever they import', () => {
    expect(needsProcess('test/cli/a.test.ts', `import { runCliInProcess } from '../helpers/cli.js';`)).toBe(false);
    expect(needsProcess('test/load/a.test.ts', `import { withDuck, lakeContent } from './helpers.js';`)).toBe(false);
    expect(needsProcess('test/reliability/a.test.ts', `import { demoJob } from './helpers.js';`)).toBe(true);
  });

  it('holds this file and the in-process runs, and no file of the suite that starts a process', () => {
    const fast = fastTestFiles();
    expect(fast).toContain('test/tiers.test.ts');
    expect(fast).toContain('test/decode/in-run.test.ts');
    for (const f of ['test/ops/window-chunks.test.ts', 'test/distributed/kill.test.ts', 'test/cli/in-process.test.ts', 'test/reliability/faults.test.ts'])
      expect(fast, f).not.toContain(f);
    const starts = new RegExp(t(`node:child~_process|\\bstart~Postgres\\b|\\brun~Writer\\b|\\bstart~Writer\\b`));
    for (const f of fast) expect(readFileSync(f, 'utf8'), f).not.toMatch(starts);
  });
});

describe('the process tier: shared forks, or a fork of its own', () => {
  it('gives a fork of its own to a file that changes the process, however it is written', () => {
    const changing = [
      t(`process.e~nv.CHAINLAKE_CATALOG = db.url;`),
      t(`process.e~nv['AWS_REGION'] = 'x';`),
      t(`Object.assign(process.e~nv, s3.env);`),
      t(`delete process.e~nv.PGPASSWORD;`),
      t(`process.o~nce('SIGTERM', stop);`),
      t(`process.o~n('exit', done);`),
      t(`process.ch~dir(dir);`),
      t(`process.exit~Code = 0;`),
      t(`vi.mo~ck('../../src/load/engine.js');`),
      t(`vi.stub~Env('X', '1');`),
      t(`import { forceCollection } from '../../src/cli/runtime-tun~ing.js';`),
      t(`setGarbage~Collector(undefined);`),
    ];
    for (const text of changing) expect(needsOwnFork('test/x/a.test.ts', text), text).toBe(true);
  });

  it('shares forks among files that only read the process or compare with it', () => {
    for (const text of [
      `const key = process.env.CHAINLAKE_API_KEY;`,
      `if (process.env.CHAINLAKE_SOAK === '1') {}`,
      `expect(process.exitCode).toBe(undefined);`,
      `const CLI = path.resolve('dist/cli/main.js');`,
    ])
      expect(needsOwnFork('test/x/a.test.ts', text), text).toBe(false);
  });

  it('shares forks only among process-tier files, and no file of the suite that changes the process', () => {
    const fast = new Set(fastTestFiles());
    const shared = sharedProcessTestFiles();
    expect(shared.length).toBeGreaterThan(20);
    for (const f of shared) {
      expect(fast.has(f), f).toBe(false);
      expect(needsOwnFork(f, readFileSync(f, 'utf8')), f).toBe(false);
    }
    for (const f of ['test/distributed/workers.test.ts', 'test/cli/garbage.test.ts', 'test/reliability/bad-input.test.ts']) expect(shared, f).not.toContain(f);
    expect(shared, 'a soak that changes nothing').toContain('test/reliability/crashes.test.ts');
  });
});
