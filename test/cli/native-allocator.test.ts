import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ALLOCATOR_ENV, DUCKDB_ALLOCATOR_CONF, TUNING_ENV } from '../../src/cli/runtime-tuning.js';

/**
 * DuckDB's jemalloc reads its options once, when libduckdb loads. A child process (of the built dist, as the CLI
 * runs) reports the options in its environment and whether libduckdb is mapped; that the options come first is
 * the order of imports, checked by the last test.
 */
function child(entries: string[], env: NodeJS.ProcessEnv): { conf: string | null; duckdbLoaded: boolean } {
  const script = `
    import { readFileSync } from 'node:fs';
    for (const entry of ${JSON.stringify(entries.map((e) => path.resolve(e)))}) await import(entry);
    process.stdout.write(JSON.stringify({
      conf: process.env.${ALLOCATOR_ENV} ?? null,
      duckdbLoaded: readFileSync('/proc/self/maps', 'utf8').includes('libduckdb'),
    }));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env, timeout: 30_000 });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { conf: string | null; duckdbLoaded: boolean };
}

const withoutConf = (): NodeJS.ProcessEnv => {
  const env = { ...process.env };
  delete env[ALLOCATOR_ENV];
  return env;
};

describe('DuckDB allocator options', () => {
  it('are set by the runtime tuning before the engine loads DuckDB', () => {
    const r = child(['dist/cli/runtime-tuning.js', 'dist/load/engine.js'], withoutConf());
    expect(r.duckdbLoaded).toBe(true);
    expect(r.conf).toBe(DUCKDB_ALLOCATOR_CONF);
  });

  it('leave options the user set alone, and are not set with the tuning off or by the library', () => {
    expect(child(['dist/cli/runtime-tuning.js', 'dist/load/engine.js'], { ...withoutConf(), [ALLOCATOR_ENV]: 'narenas:2' }).conf).toBe('narenas:2');
    expect(child(['dist/cli/runtime-tuning.js', 'dist/load/engine.js'], { ...withoutConf(), [TUNING_ENV]: 'off' }).conf).toBeNull();
    const library = child(['dist/index.js'], withoutConf());
    expect(library.duckdbLoaded).toBe(true);
    expect(library.conf).toBeNull();
  });

  it('come first in the CLI, before any module that loads DuckDB', () => {
    // ES modules evaluate their imports in order: the first import of the entry point runs before the rest.
    const imports = readFileSync('src/cli/main.ts', 'utf8').match(/^import .*$/gm)!;
    expect(imports[0]).toBe("import './runtime-tuning.js';");
  });
});
