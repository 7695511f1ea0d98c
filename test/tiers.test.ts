import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fastTestFiles, needsProcess } from './tiers.js';

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
