import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// The layers of src/, highest first (docs/architecture.md, "Layers"). A module may import its own layer's
// modules and any lower layer's; an import that points up, or any cycle between files, fails here with the
// files named. Type-only imports count: a type names a dependency as much as a value does.
const LAYERS: readonly (readonly string[])[] = [
  ['cli', 'index.ts'],
  ['distributed', 'pipeline', 'observe', 'report', 'lake'],
  ['load', 'decode'],
  ['simulator'],
  ['extract', 'transform', 'ducklake'],
  ['datasets', 'schedule'],
  ['evm'],
  ['errors.ts'],
];
/** Who may import the simulator (a test and demo server, not a stage): the CLI, and these files, each for a reason. */
const SIMULATOR_IMPORTERS: Readonly<Record<string, string>> = {
  // `"target": "simulator"`: a job (the library's too) runs against the embedded simulator, started for the run.
  'src/pipeline/source.ts': 'the embedded target',
};

/**
 * Configuration comes from the environment in one place: the CLI resolves it (flags over variables) and hands
 * the stages plain values. Below src/cli/ only these files read process.env, each for a reason.
 */
const ENVIRONMENT_READERS: Readonly<Record<string, string>> = {
  // runJob / streamDataset given a job, lakeReport given a distributed lake: resolved with the host's environment (the
  // URLs and key; the store's endpoint and region), as the CLI resolves its job file and its --store.
  'src/index.ts': "the library's entry resolves a job and a store connection as the CLI does",
};
const ENV_READ = /\bprocess\.env\b/;

/** The layer of a file under src/: its folder, or the file itself at the top. */
const unitOf = (file: string): string => file.split('/')[1]!;
const rankOf = (file: string): number => {
  const i = LAYERS.findIndex((l) => l.includes(unitOf(file)));
  if (i < 0) throw new Error(`${file}: ${unitOf(file)} is in no layer of test/architecture.test.ts: place it`);
  return LAYERS.length - i;
};

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.posix.join(dir, e.name);
    return e.isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Each file's relative imports (static, dynamic, type-only and re-exports), as paths of src/ files. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sources('src')) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    graph.set(
      file,
      importedFiles
        .map((i) => i.fileName)
        .filter((name) => name.startsWith('.'))
        .map((name) => path.posix.normalize(path.posix.join(path.posix.dirname(file), name.replace(/\.js$/, '.ts')))),
    );
  }
  return graph;
}

/** The cycles among `graph`'s files, each as the files along it (Tarjan's strongly connected components). */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe('architecture', () => {
  const graph = importGraph();

  it('every import resolves to a file of src/', () => {
    const missing = [...graph].flatMap(([from, to]) => to.filter((t) => !graph.has(t)).map((t) => `${from} -> ${t}`));
    expect(missing).toEqual([]);
  });

  it('every import points down (or within its layer)', () => {
    const upward = [...graph].flatMap(([from, to]) => to.filter((t) => rankOf(t) > rankOf(from)).map((t) => `${from} -> ${t}`));
    expect(upward, 'imports that point up a layer').toEqual([]);
  });

  it("DuckDB's Node API is loaded through src/ducklake/node-api.ts only (values; types may come from the package)", () => {
    // An ES import of the CommonJS package costs every process its module lexer's parse of ~180 files
    // (docs/performance.md, "Startup"); node-api.ts requires it instead.
    const valueImport = /^\s*import\s+(?!type\b)[^;]*?from\s+'@duckdb\/node-api'|import\(\s*'@duckdb\/node-api'\s*\)/m;
    const importers = sources('src').filter((f) => f !== 'src/ducklake/node-api.ts' && valueImport.test(readFileSync(f, 'utf8')));
    expect(importers).toEqual([]);
  });

  it('nothing but the CLI (and the files named, each for a reason) imports the simulator', () => {
    const importers = [...graph].flatMap(([from, to]) =>
      to.some((t) => unitOf(t) === 'simulator') && !['simulator', 'cli'].includes(unitOf(from)) && !(from in SIMULATOR_IMPORTERS) ? [from] : [],
    );
    expect(importers).toEqual([]);
  });

  it('nothing below the CLI reads the environment (but the files named, each for a reason)', () => {
    const readers = [...graph.keys()].flatMap((file) =>
      unitOf(file) === 'cli' || file in ENVIRONMENT_READERS
        ? []
        : readFileSync(file, 'utf8')
            .split('\n')
            .flatMap((line, i) => (ENV_READ.test(line) ? [`${file}:${i + 1}: takes a value from process.env; resolve it in src/cli/ and pass it down`] : [])),
    );
    expect(readers).toEqual([]);
    // Each reason still holds: a file named here that stopped reading the environment leaves the list.
    expect(Object.keys(ENVIRONMENT_READERS).filter((f) => !ENV_READ.test(readFileSync(f, 'utf8')))).toEqual([]);
  });

  it("every ChainlakeError class below the CLI is exported by the library's entry (the error family)", () => {
    // Classes extending ChainlakeError, directly or through another: the library's caller can name each one it may
    // meet (matching is on `err.code`; the class documents and narrows). The CLI's CliError is the CLI's own.
    const parents = new Map<string, string>();
    // A class declaration at a line's start, as prettier leaves every top-level one: a regular expression over the
    // text finds the same classes and bases as TypeScript's parser (checked when this replaced it), which took
    // seconds over all of src/.
    const declaration = /^(?:export\s+)?(?:default\s+)?(?:abstract\s+)?class\s+(\w+)(?:\s*<[^{]*?>)?\s+extends\s+([\w.]+)/gm;
    for (const file of graph.keys()) {
      if (unitOf(file) === 'cli') continue;
      for (const [, name, base] of readFileSync(file, 'utf8').matchAll(declaration)) parents.set(name!, base!);
    }
    const isFamily = (name: string, depth = 0): boolean =>
      depth < 10 && parents.has(name) && (parents.get(name) === 'ChainlakeError' || isFamily(parents.get(name)!, depth + 1));
    const entry = ts.createSourceFile('src/index.ts', readFileSync('src/index.ts', 'utf8'), ts.ScriptTarget.Latest);
    const exported = new Set(
      entry.statements.flatMap((s) =>
        ts.isExportDeclaration(s) && s.exportClause && ts.isNamedExports(s.exportClause) ? s.exportClause.elements.map((e) => e.name.text) : [],
      ),
    );
    const family = [...parents.keys()].filter((n) => isFamily(n));
    expect(family.length).toBeGreaterThan(10);
    expect(family.filter((n) => !exported.has(n))).toEqual([]);
  });

  it('no cycle between files', () => {
    expect(cycles(graph).map((c) => c.join(' <-> '))).toEqual([]);
  });

  it('sees an upward import and a cycle (the check itself)', () => {
    const g = new Map([
      ['src/load/a.ts', ['src/cli/b.ts']],
      ['src/cli/b.ts', ['src/load/a.ts']],
    ]);
    expect([...g].flatMap(([from, to]) => to.filter((t) => rankOf(t) > rankOf(from)))).toEqual(['src/cli/b.ts']);
    expect(cycles(g)).toEqual([['src/cli/b.ts', 'src/load/a.ts']]);
  });
});
