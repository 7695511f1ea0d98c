import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * V8's young generation is sized when the process starts, so each case is a child process of the built dist:
 * it imports the module (or not), then keeps a window of 200k-400k fresh objects alive, as typing a page does,
 * which makes V8 grow the young generation, and reports the new space's size in MB.
 */
function newSpaceMb(opts: { importModule: boolean; entry?: string; execArgv?: string[]; nodeOptions?: string; env?: NodeJS.ProcessEnv }): number {
  const entry = path.resolve(opts.entry ?? 'dist/cli/runtime-tuning.js');
  const script = `
    import v8 from 'node:v8';
    ${opts.importModule ? `await import(${JSON.stringify(entry)});` : ''}
    let keep = [];
    for (let round = 0; round < 6; round++) {
      for (let i = 0; i < 200000; i++) keep.push({ i, s: 'x' + i });
      if (keep.length > 400000) keep = keep.slice(200000);
    }
    const space = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
    process.stdout.write(String(space.space_size / 1048576));`;
  const env = { ...process.env, NODE_OPTIONS: opts.nodeOptions ?? '', ...opts.env };
  const r = spawnSync(process.execPath, [...(opts.execArgv ?? []), '--input-type=module', '-e', script], { encoding: 'utf8', env, timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  expect(r.stderr).toBe('');
  return Number(r.stdout);
}

describe('young generation', () => {
  it('grows under this load without the module, and stays at its initial size with it', () => {
    expect(newSpaceMb({ importModule: false })).toBeGreaterThanOrEqual(16);
    // The smallest of three: on a loaded machine Node 24's V8 sometimes grows the space anyway (about one run in
    // sixty here, to 3-22 MB, whatever flags are set once it runs), which no run without the module escapes.
    expect(Math.min(...[1, 2, 3].map(() => newSpaceMb({ importModule: true })))).toBeLessThanOrEqual(2);
  });

  it('is left as the user sized it, on the command line or in NODE_OPTIONS', () => {
    expect(newSpaceMb({ importModule: true, execArgv: ['--max-semi-space-size=8'] })).toBeGreaterThanOrEqual(8);
    expect(newSpaceMb({ importModule: true, nodeOptions: '--max-semi-space-size=8' })).toBeGreaterThanOrEqual(8);
  });

  it('is kept small by the CLI before anything else runs', () => {
    const imports = readFileSync('src/cli/main.ts', 'utf8').match(/^import .*$/gm)!;
    expect(imports[0]).toBe("import './runtime-tuning.js';");
  });

  it('is left alone with CHAINLAKE_RUNTIME_TUNING=off, and by the library', () => {
    expect(newSpaceMb({ importModule: true, env: { CHAINLAKE_RUNTIME_TUNING: 'off' } })).toBeGreaterThanOrEqual(16);
    // Importing the library changes no V8 flag: the young generation grows as it does without chainlake.
    expect(newSpaceMb({ importModule: true, entry: 'dist/index.js' })).toBeGreaterThanOrEqual(16);
  });
});
