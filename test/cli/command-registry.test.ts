import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMMANDS, commandOf } from '../../src/cli/command-registry.js';
import { runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

describe('the command registry (each command loaded only when it runs)', () => {
  it('names each command as its module does, so a command line loads the module that handles it', async () => {
    for (const [name, load] of Object.entries(COMMANDS)) expect(String((await load()).command).split(' ')[0]).toBe(name);
  });

  it('finds the command after the global options, and none for a mistyped or missing one', () => {
    expect(commandOf(['run', 'jobs/demo.json'])).toBe('run');
    expect(commandOf(['--log-format', 'json', '-q', 'query', 'SELECT 1'])).toBe('query');
    expect(commandOf(['--verbose', 'verify-contract', '0xabc'])).toBe('verify-contract');
    expect(commandOf(['rnu', 'jobs/demo.json'])).toBeUndefined();
    expect(commandOf(['--help'])).toBeUndefined();
    expect(commandOf(['constructor'])).toBeUndefined();
  });
});

describe('a command line refused before any work', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => ({ dir, cleanup } = await tempDir('chainlake-light-start-')));
  afterAll(async () => cleanup?.());

  /** The native libraries the CLI process had loaded when it exited (from its own diagnostic report). */
  async function nativeLibraries(args: string[]): Promise<{ code: number | null; stderr: string; libs: string[] }> {
    const probe = path.join(dir, 'probe.mjs');
    const out = path.join(dir, 'libs.json');
    await writeFile(
      probe,
      `import { writeFileSync } from 'node:fs';\nprocess.on('exit', () => writeFileSync(${JSON.stringify(out)}, JSON.stringify(process.report.getReport().sharedObjects)));\n`,
    );
    const r = await runCli(args, { env: { NODE_OPTIONS: `--import ${pathToFileURL(probe).href}` } });
    return { code: r.code, stderr: r.stderr, libs: JSON.parse(await readFile(out, 'utf8')) as string[] };
  }

  it('does not load DuckDB: a bad flag or --help answers at once', async () => {
    const bad = await nativeLibraries(['run', 'jobs/demo.json', '--concurrency', 'abc']);
    expect(bad.stderr).toMatch(/--concurrency must be an integer/);
    expect(bad.code).toBe(2);
    expect(bad.libs.filter((l) => /duckdb/i.test(l))).toEqual([]);
    expect((await nativeLibraries(['run', '--help'])).libs.filter((l) => /duckdb/i.test(l))).toEqual([]);
    // The probe sees DuckDB when it is loaded: a query loads it.
    const query = await nativeLibraries(['query', '--lake', path.join(dir, 'no-lake'), 'SELECT 1']);
    expect(query.code).toBe(2);
    expect(query.libs.filter((l) => /duckdb/i.test(l)).length).toBeGreaterThan(0);
  });
});
