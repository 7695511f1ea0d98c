import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/lake.js';

/**
 * The package as npm publishes it (`npm pack`), installed into an empty project and used from there: the API as
 * ESM with its types, the `chainlake` bin, and nothing else reachable or shipped. The build is dist/ as
 * test/build-setup.ts left it.
 *
 * Installing: `npm install --offline <tgz>` first; this machine's npm cache rarely holds the dependencies, and
 * tests may not reach the registry, so when that fails the tarball is unpacked as npm would lay it out
 * (node_modules/chainlake, its bin in node_modules/.bin) and its dependencies are linked from this worktree's
 * node_modules. Either way the package's own files are exactly the tarball's.
 */
let dir: string;
let cleanup: () => Promise<void>;
let files: string[];
let how: 'npm install --offline' | 'unpacked, dependencies linked';

const run = (cmd: string, args: string[], cwd: string) =>
  spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout: 120_000, env: { ...process.env, npm_config_update_notifier: 'false' } });

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir('chainlake-pack-'));
  const packed = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })) as {
    filename: string;
    files: { path: string }[];
  }[];
  files = packed[0]!.files.map((f) => f.path);
  const tgz = path.join(dir, packed[0]!.filename);
  const app = path.join(dir, 'app');
  await mkdir(app);
  await writeFile(path.join(app, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  const installed = run('npm', ['install', '--offline', '--no-audit', '--no-fund', tgz], app);
  if (installed.status === 0) how = 'npm install --offline';
  else {
    how = 'unpacked, dependencies linked';
    const pkg = path.join(app, 'node_modules', 'chainlake');
    await mkdir(pkg, { recursive: true });
    execFileSync('tar', ['xzf', tgz, '-C', pkg, '--strip-components=1']);
    await symlink(path.resolve('node_modules'), path.join(pkg, 'node_modules'));
    await mkdir(path.join(app, 'node_modules', '.bin'));
    await symlink('../chainlake/dist/cli/main.js', path.join(app, 'node_modules', '.bin', 'chainlake'));
    // As npm does for a package's bins on install.
    await chmod(path.join(pkg, 'dist', 'cli', 'main.js'), 0o755);
  }
}, 180_000);

afterAll(async () => {
  await cleanup?.();
});

describe(`the packed package`, () => {
  it('ships the build, the job files and the docs, and nothing else', () => {
    const unwanted = files.filter(
      (f) => /^(src|test|bench|data|node_modules|coverage)\//.test(f) || f.startsWith('dist/bench-build/') || /\.map$/.test(f) || /(?<!\.d)\.ts$/.test(f),
    );
    expect(unwanted).toEqual([]);
    // Every shipped module is the build of a source file today: the output of one since removed or moved (a dist/
    // built before, or by other means) would ship modules nothing maintains.
    const orphans = files.filter((f) => /^dist\/.*\.(js|d\.ts)$/.test(f) && !existsSync(f.replace(/^dist\//, 'src/').replace(/(\.d)?\.ts$|\.js$/, '.ts')));
    expect(orphans).toEqual([]);
    for (const needed of [
      'package.json',
      'README.md',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/cli/main.js',
      'dist/load/read/arrow.js',
      'jobs/demo.json',
      'jobs/job.schema.json',
      'docs/lake.md',
    ]) {
      expect(files, needed).toContain(needed);
    }
    // Every module the API and the CLI import is shipped: a relative import of a shipped file names a shipped file.
    const shipped = new Set(files);
    for (const f of files.filter((x) => x.endsWith('.js'))) expect(shipped.has(f.replace(/\.js$/, '.d.ts')), `${f} has its types`).toBe(true);
  });

  it('imports at run time only packages it declares as dependencies (an install without dev dependencies runs it)', async () => {
    // The container image installs with --omit=dev (deploy/docker/Dockerfile), and so does any user's production
    // install: a shipped module importing a dev dependency would fail there and nowhere in this suite.
    const pkg = JSON.parse(await readFile('package.json', 'utf8')) as { dependencies: Record<string, string> };
    const declared = new Set(Object.keys(pkg.dependencies));
    const patterns = [
      /(?:^|\n)(?:import|export)\s[^;]*?\sfrom\s'([^']+)'/g,
      /(?:^|\n)import\s'([^']+)'/g,
      /\bimport\('([^']+)'\)/g,
      /\bcreateRequire\(import\.meta\.url\)\('([^']+)'\)/g,
    ];
    const used = new Map<string, string>();
    for (const f of files.filter((x) => x.endsWith('.js'))) {
      const text = await readFile(f, 'utf8');
      for (const re of patterns) {
        for (const [, spec] of text.matchAll(re)) {
          if (spec!.startsWith('.') || spec!.startsWith('node:')) continue;
          const name = spec!.startsWith('@') ? spec!.split('/').slice(0, 2).join('/') : spec!.split('/')[0]!;
          used.set(name, f);
        }
      }
    }
    // What the CLI and the library load: without them the scan would be looking at nothing.
    for (const name of ['@duckdb/node-api', 'pg-boss', 'yargs', 'viem']) expect([...used.keys()], name).toContain(name);
    const undeclared = [...used].filter(([name]) => !declared.has(name)).map(([name, f]) => `${name} (${f})`);
    expect(undeclared).toEqual([]);
  });

  it(`imports as ESM, with types that resolve, from an empty project`, async () => {
    const app = path.join(dir, 'app');
    const r = run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const api = await import('chainlake');
         const names = Object.keys(api).sort();
         let hidden = 'reachable';
         try { await import('chainlake/dist/load/read/arrow.js'); } catch (e) { hidden = e.code; }
         process.stdout.write(JSON.stringify({ names, hidden }));`,
      ],
      app,
    );
    expect(r.status, `${how}: ${r.stderr}`).toBe(0);
    const { names, hidden } = JSON.parse(r.stdout) as { names: string[]; hidden: string };
    expect(names).toEqual(expect.arrayContaining(['runJob', 'exportDataset', 'openLake', 'streamDataset', 'JobError', 'NoLakeError']));
    expect(hidden).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');

    await writeFile(
      path.join(app, 'consumer.ts'),
      `import { openLake, streamDataset, type RunReport, type RecordBatch } from 'chainlake';
       export async function rows(dir: string): Promise<number> {
         const lake = await openLake(dir);
         let n = 0;
         for await (const row of lake.query('SELECT 1 AS one')) n += Number(row.one);
         await lake.close();
         return n;
       }
       export async function batches(): Promise<number> {
         let n = 0;
         for await (const b of streamDataset({ dataset: 'blocks', target: 'simulator', spec: { blocks: ['0-5'] } })) n += (b satisfies RecordBatch).numRows;
         return n;
       }
       export const status = (r: RunReport): string => r.status;
       // @ts-expect-error: the report's status is a union of known states
       export const wrong: RunReport['status'] = 'finished';
       `,
    );
    await writeFile(
      path.join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, skipLibCheck: true, types: [] },
        files: ['consumer.ts'],
      }),
    );
    const tsc = run(process.execPath, [path.resolve('node_modules/typescript/bin/tsc'), '-p', app], app);
    expect(tsc.status, tsc.stdout + tsc.stderr).toBe(0);
  });

  it('runs `npx chainlake --version`', async () => {
    const r = run('npx', ['--no-install', 'chainlake', '--version'], path.join(dir, 'app'));
    expect(r.status, r.stderr).toBe(0);
    const version = (JSON.parse(await readFile('package.json', 'utf8')) as { version: string }).version;
    // An install is not a git checkout: no commit.
    expect(r.stdout.trim()).toMatch(new RegExp(`^${version.replace(/\./g, '\\.')} \\(duckdb v[^,)]+\\)$`));
  });
});
