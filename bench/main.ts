// `npm run bench [-- <scenario>...] [--quick]`: the performance scenarios of issue 8, each beside its
// reference measured in the same run, as a table with PASS/FAIL per target and as JSON.

import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { withDuckDB } from './lib/native.js';
import { RESULTS_DIR } from './lib/paths.js';
import { formatDetails, formatTable, type Context, type ScenarioResult } from './lib/result.js';
import { decode } from './scenarios/decode.js';
import { distributed } from './scenarios/distributed.js';
import { e2e } from './scenarios/e2e.js';
import { latency } from './scenarios/latency.js';
import { memory } from './scenarios/memory.js';
import { query } from './scenarios/query.js';
import { quota } from './scenarios/quota.js';
import { rate } from './scenarios/rate.js';
import { replay } from './scenarios/replay.js';
import { simulator } from './scenarios/simulator.js';
import { size } from './scenarios/size.js';
import { verify } from './scenarios/verify.js';

const SCENARIOS: Record<string, (ctx: Context) => Promise<Omit<ScenarioResult, 'seconds'>>> = {
  e2e,
  replay,
  rate,
  latency,
  memory,
  size,
  simulator,
  query,
  quota,
  decode,
  distributed,
  verify,
};

function usage(): never {
  process.stderr.write(`usage: npm run bench [-- [--quick] [--keep] [scenario...]]\nscenarios: ${Object.keys(SCENARIOS).join(', ')}\n`);
  process.exit(2);
}

async function machine(): Promise<Record<string, unknown>> {
  const git = (args: string[]): string => {
    try {
      return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return 'unknown';
    }
  };
  const duckdb = await withDuckDB(async (run) => String((await run('SELECT version()'))[0]![0]));
  return {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    duckdb,
    // The machine may be shared: wall-clock figures mean little under load, so say what the load was.
    loadAverage: os.loadavg().map((l) => Math.round(l * 100) / 100),
    commit: git(['rev-parse', '--short', 'HEAD']),
    dirty: git(['status', '--porcelain', '--untracked-files=no']) !== '',
  };
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const keep = args.includes('--keep');
  const names = args.filter((a) => !a.startsWith('--'));
  for (const a of args) if (a.startsWith('--') && a !== '--quick' && a !== '--keep') usage();
  for (const n of names) if (!SCENARIOS[n]) usage();
  const chosen = names.length ? names : Object.keys(SCENARIOS);

  const started = new Date();
  const info = await machine();
  process.stderr.write(
    `chainlake bench${quick ? ' --quick' : ''}: ${chosen.join(', ')} on ${info.cpus} cores (load average ${(info.loadAverage as number[]).join(' ')}), node ${info.node}, DuckDB ${info.duckdb}\n`,
  );
  const root = await mkdtemp(path.join(os.tmpdir(), 'chainlake-bench-'));
  const results: ScenarioResult[] = [];
  const errors: { scenario: string; error: string }[] = [];
  try {
    for (const name of chosen) {
      const tmp = path.join(root, name);
      await mkdir(tmp, { recursive: true });
      const log = (m: string): void => void process.stderr.write(`  [${name}] ${m}\n`);
      const t0 = performance.now();
      try {
        const r = { ...(await SCENARIOS[name]!({ quick, tmp, log })), seconds: (performance.now() - t0) / 1000 };
        results.push(r);
        process.stderr.write(formatDetails(r) + '\n');
      } catch (e) {
        errors.push({ scenario: name, error: (e as Error).stack ?? String(e) });
        process.stderr.write(`== ${name}: ERROR ${(e as Error).stack ?? e}\n`);
      }
      if (!keep) await rm(tmp, { recursive: true, force: true });
    }
  } finally {
    if (!keep) await rm(root, { recursive: true, force: true });
    else process.stderr.write(`kept ${root}\n`);
  }

  process.stdout.write('\n' + formatTable(results) + '\n');
  const out = path.join(RESULTS_DIR, quick ? 'latest-quick.json' : 'latest.json');
  await mkdir(RESULTS_DIR, { recursive: true });
  const doc = {
    finishedLoadAverage: os.loadavg().map((l) => Math.round(l * 100) / 100),
    startedAt: started.toISOString(),
    quick,
    command: `npm run bench -- ${args.join(' ')}`.trim(),
    machine: info,
    results,
    errors,
  };
  await writeFile(out, JSON.stringify(doc, null, 2) + '\n');
  process.stdout.write(`\nwritten ${path.relative(process.cwd(), out)}\n`);
  if (errors.length) {
    process.stderr.write(`${errors.length} scenario(s) failed to run: ${errors.map((e) => e.scenario).join(', ')}\n`);
    process.exitCode = 1;
  }
  // A quick run asserts the bench works: every scenario produced figures and every figure is a number.
  if (quick) {
    for (const r of results) {
      for (const t of r.targets) {
        if (!Number.isFinite(t.value)) {
          process.stderr.write(`quick: ${r.scenario} target '${t.name}' measured ${t.value}\n`);
          process.exitCode = 1;
        }
      }
      if (r.targets.length === 0) {
        process.stderr.write(`quick: ${r.scenario} measured nothing\n`);
        process.exitCode = 1;
      }
    }
  }
}

await main();
