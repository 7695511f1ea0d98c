import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';
import { startPostgres } from '../../test/ducklake/postgres.js';
import { runExport } from '../lib/export.js';
import { CLI } from '../lib/paths.js';
import { target, type Context, type ScenarioResult } from '../lib/result.js';
import { startSimProcess, type SimProcess, type SimStats } from '../lib/simproc.js';
import { buildWorkload, describeWorkload, jobDoc, writeJob } from '../lib/workload.js';

const RATE = 20;
const PAGE = 100;
const ACCOUNTS = [1, 2, 4] as const;
const JOB = 'bench-distributed';
const WARM_UP_JOB = 'bench-warm-up';

async function enqueueJob(file: string, env: NodeJS.ProcessEnv): Promise<void> {
  const enq = spawn(process.execPath, [CLI, 'enqueue', file, '--quiet'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  const [code] = (await once(enq, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`bench: enqueue of ${file} exited with ${code}`);
}

/** The last lines each worker wrote (its stderr), for the error of a worker that died. */
const said = new WeakMap<ChildProcess, string>();

/**
 * When the job's run finished (epoch ms, the catalog's clock): the committer closes a run in its last commit. A
 * worker that exits meanwhile fails the scenario at once with its last lines (nothing else would finish the run).
 */
async function runFinished(client: pg.Client, job: string, workers: readonly ChildProcess[]): Promise<number> {
  for (let polls = 0; polls <= 60_000; polls++) {
    const dead = workers.find((w) => w.exitCode !== null || w.signalCode !== null);
    if (dead)
      throw new Error(
        `bench: a worker exited (${dead.exitCode ?? dead.signalCode}) before ${job} finished; its last lines:\n${(said.get(dead) ?? '').slice(-3000)}`,
      );
    const r = (
      await client.query(`SELECT (EXTRACT(EPOCH FROM finished_at) * 1000)::FLOAT8 AS t FROM chainlake.runs WHERE job = $1 AND finished_at IS NOT NULL`, [job])
    ).rows[0];
    if (r) return Number(r.t);
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`bench: the run of ${job} did not finish within 10 minutes`);
}

/** Resolves at the first JSON log line of `child` with this event (its stderr). */
/** Requests per simulator route between two readings of one simulator's counters. */
function routesSince(before: SimStats, after: SimStats): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [route, n] of Object.entries(after.byRoute)) {
    const d = n - (before.byRoute[route] ?? 0);
    if (d !== 0) out[route] = d;
  }
  return out;
}

function addRoutes(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const out = { ...a };
  for (const [route, n] of Object.entries(b)) out[route] = (out[route] ?? 0) + n;
  return out;
}

/** `route: distributed vs single` for each route whose count differs; empty when none does. */
function routeDifferences(got: Record<string, number>, single: Record<string, number>): string {
  return [...new Set([...Object.keys(got), ...Object.keys(single)])]
    .sort()
    .filter((r) => (got[r] ?? 0) !== (single[r] ?? 0))
    .map((r) => `${r} ${got[r] ?? 0} vs ${single[r] ?? 0}`)
    .join(', ');
}

function waitForEvent(child: ChildProcess, event: string, timeoutMs = 180_000): Promise<void> {
  return new Promise((resolve, reject) => {
    let buf = '';
    // What the worker said last, for the error of a worker that never gets there (a hang must fail, not wait).
    let said_ = '';
    const timer = setTimeout(() => {
      child.stderr!.off('data', onData);
      child.kill('SIGKILL');
      reject(new Error(`bench: worker never logged ${event} within ${timeoutMs / 1000} s; its last lines:\n${said_.slice(-3000)}`));
    }, timeoutMs);
    const onData = (d: Buffer) => {
      said_ = (said_ + d.toString()).slice(-6000);
      buf += d.toString();
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.includes(`"event":"${event}"`)) {
          child.stderr!.off('data', onData);
          // Keep draining (a full pipe would stall the worker), and keep the last lines.
          said.set(child, said_);
          child.stderr!.on('data', (d: Buffer) => said.set(child, ((said.get(child) ?? '') + d.toString()).slice(-6000)));
          clearTimeout(timer);
          resolve();
          return;
        }
      }
    };
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`bench: worker exited with ${code} before ${event}`));
    });
  });
}

/**
 * Distributed: 1, 2 and 4 worker processes, one account each, each account's key limited by its own simulator
 * process (RATE req/s, 50 ms latency, pages of PAGE rows: the API, not this machine's two cores, is the bound).
 * Workers are started first, as a deployment keeps them, run a small warm-up job (the same scopes over earlier
 * blocks), and the measured job is enqueued once they wait for work again.
 * Throughput is the workload's rows over the time from the first request any simulator saw to the commit that
 * finished the run; compared with N × the one-worker throughput. Requests are all simulators'
 * together, compared with a single-machine `chainlake run` of the same job against one of them.
 */
export async function distributed(ctx: Context): Promise<Omit<ScenarioResult, 'seconds'>> {
  const sims: SimProcess[] = [];
  const postgres = await startPostgres();
  try {
    for (let i = 0; i < Math.max(...ACCOUNTS); i++) sims.push(await startSimProcess({ scale: 'large', rateLimit: RATE, latencyMs: '50' }));
    const workloadOf = (s: SimProcess) =>
      buildWorkload(s.info, ctx.quick ? 3_000 : 24_000, ['transactions', 'erc20_transfers', 'event_logs'], ctx.quick ? 3_000 : 20_000);
    const w = await workloadOf(sims[0]!);
    ctx.log(`workload: ${w.rows} rows: ${describeWorkload(w)}`);
    // Every simulator serves the workload's listings once before any round: a simulator process's first pages pay
    // its own one-time costs (its JIT, its lazily built address tables). Only the first one had paid them (it
    // served the single-machine run), so the rounds of more workers were charged for warming their simulators on
    // the exporter's cores, which a real API's warm-up never is (docs/performance.md, "Distributed").
    for (const s of sims.slice(1)) await workloadOf(s);
    // Fixed chunks: enough windows for four workers to share (the joined default gives one per scope).
    const windowBlocks = Math.max(1, Math.ceil((Number(w.range.toBlock) - Number(w.range.fromBlock) + 1) / 12));
    const base = jobDoc(sims[0]!.info, w, { lake: path.join(ctx.tmp, 'single'), rps: RATE, pageSize: PAGE, concurrency: 4 });
    base.range = { ...(base.range as object), windowBlocks };

    // The warm-up job: the same scopes over the two window spans before the measured range (other blocks, so the
    // measured job plans and fetches all its own windows).
    const warmFrom = Number(w.range.fromBlock) - 2 * windowBlocks;
    if (warmFrom < 0) throw new Error(`bench: no blocks before the workload's range (${w.range.fromBlock}) for the warm-up job`);
    const warmRange = { ...(base.range as object), fromBlock: warmFrom, toBlock: Number(w.range.fromBlock) - 1 };

    // The single machine runs the warm-up job into its lake first, as the workers do: the measured job then finds
    // the same watermarks and provisional windows on both sides (and fetches those windows again on both).
    const singleDir = path.join(ctx.tmp, 'single-run');
    await mkdir(singleDir, { recursive: true });
    const exportOpts = { rps: RATE, pageSize: PAGE, concurrency: 4 };
    await runExport(sims[0]!, w, singleDir, { ...exportOpts, extra: { range: warmRange } });
    const singleBefore = await sims[0]!.stats();
    const single = await runExport(sims[0]!, w, singleDir, { ...exportOpts, extra: { range: base.range } });
    const singleRoutes = routesSince(singleBefore, await sims[0]!.stats());
    const singleRequests = single.server.requests;
    ctx.log(`single machine (after the warm-up job): ${single.report.totals.rows} rows, ${singleRequests} requests`);

    // Workers take URLs and keys from their environment: the stored job names neither.
    const { endpoints: _e, apiKey: _k, lake: _l, ...doc } = base;
    const jobFile = path.join(ctx.tmp, 'distributed-job.json');
    await writeJob(jobFile, { ...doc, name: JOB });
    const warmFile = path.join(ctx.tmp, 'warm-up-job.json');
    await writeJob(warmFile, { ...doc, name: WARM_UP_JOB, range: warmRange });

    const results: { accounts: number; seconds: number; rowsPerSecond: number; requests: number; rows: number }[] = [];
    for (const n of ACCOUNTS) {
      const db = await postgres.database();
      const store = path.join(ctx.tmp, `store-${n}`);
      const env = (i: number) => ({
        ...process.env,
        PGPASSWORD: postgres.password,
        CHAINLAKE_CATALOG: db.url,
        CHAINLAKE_STORE: store,
        CHAINLAKE_MAINNET_URL: sims[i]!.info.mainnet,
        CHAINLAKE_API_KEY: sims[i]!.info.apiKey,
        CHAINLAKE_ACCOUNT: `account-${i}`,
      });
      // Workers are long-lived in a deployment: they are started first and measured once they wait for work.
      const workers = Array.from({ length: n }, (_, i) =>
        spawn(process.execPath, [CLI, 'worker', '--poll-ms', '100', '--log-format', 'json', '--verbose'], { env: env(i), stdio: ['ignore', 'ignore', 'pipe'] }),
      );
      await Promise.all(workers.map((c) => waitForEvent(c, 'worker.idle')));
      const client = await db.connect();
      // A deployment's workers have run earlier jobs: a process's first windows pay its JIT on the machine's two
      // cores, a cost of starting, not of scaling (docs/performance.md, "Distributed").
      await enqueueJob(warmFile, env(0));
      await runFinished(client, WARM_UP_JOB, workers);
      const before = await Promise.all(sims.map((s) => s.stats()));
      let firstAt = 0;
      const poller = (async () => {
        while (firstAt === 0) {
          const now = await Promise.all(sims.map((s) => s.stats()));
          if (now.some((s, i) => s.requests > before[i]!.requests)) firstAt = Date.now();
          else await new Promise((r) => setTimeout(r, 10));
        }
      })();
      await enqueueJob(jobFile, env(0));
      await poller;
      const endAt = await runFinished(client, JOB, workers);
      for (const w of workers) w.kill('SIGTERM');
      const codes = await Promise.all(workers.map((c) => (c.exitCode !== null ? c.exitCode : once(c, 'exit').then(([c]) => c as number | null))));
      if (codes.some((c) => c !== 0)) throw new Error(`bench: worker exit codes ${codes.join(', ')}`);
      const after = await Promise.all(sims.map((s) => s.stats()));
      const requests = after.reduce((a, s, i) => a + s.requests - before[i]!.requests, 0);
      const limited = after.reduce((a, s, i) => a + s.rateLimited - before[i]!.rateLimited, 0);
      const routes = after.map((s, i) => routesSince(before[i]!, s)).reduce(addRoutes, {});
      const differ = routeDifferences(routes, singleRoutes);
      if (differ) ctx.log(`${n} worker(s): requests by route, where they differ from the single machine's: ${differ}`);
      const state = (await client.query(`SELECT job, status FROM chainlake.runs ORDER BY started_at`)).rows.map((r) => `${r.job} ${r.status}`);
      if (state.join() !== `${WARM_UP_JOB} complete,${JOB} complete`) throw new Error(`bench: runs ended ${state.join(', ')}`);
      const ofJob = `run_id IN (SELECT run_id FROM chainlake.runs WHERE job = '${JOB}')`;
      const rows = Number(
        (await client.query(`SELECT COALESCE(sum(rows_got), 0)::BIGINT AS n FROM chainlake.windows WHERE status = 'committed' AND ${ofJob}`)).rows[0].n,
      );
      const seconds = (endAt - firstAt) / 1000;
      const lastFetch = Number(
        (await client.query(`SELECT (EXTRACT(EPOCH FROM max(fetched_at)) * 1000)::FLOAT8 AS t FROM chainlake.windows WHERE ${ofJob}`)).rows[0].t,
      );
      const commits = Number((await client.query(`SELECT count(DISTINCT snapshot_id)::INT AS n FROM chainlake.windows WHERE ${ofJob}`)).rows[0].n);
      ctx.log(`${n} worker(s): last window fetched ${((lastFetch - firstAt) / 1000).toFixed(1)} s after the first request; ${commits} snapshots`);
      results.push({ accounts: n, seconds, rowsPerSecond: w.rows / seconds, requests, rows });
      ctx.log(
        `${n} worker(s): ${rows} rows fetched in ${seconds.toFixed(1)} s (${(w.rows / seconds).toFixed(0)} rows/s), ${requests} requests, ${limited} 429s`,
      );
    }
    const one = results[0]!.rowsPerSecond;
    const measured: Record<string, number> = { rows: w.rows, 'single-machine requests': singleRequests };
    const targets = [];
    for (const r of results) {
      measured[`${r.accounts} worker(s): rows/s`] = r.rowsPerSecond;
      measured[`${r.accounts} worker(s): requests`] = r.requests;
      if (r.accounts > 1) targets.push(target(`${r.accounts} accounts: throughput / linear`, r.rowsPerSecond / (r.accounts * one), '>=', 0.8, '×', ctx.quick));
      targets.push(target(`${r.accounts} worker(s): requests / single machine`, r.requests / singleRequests, '<=', 1.02, '×', ctx.quick));
    }
    return {
      scenario: 'distributed',
      title: `distributed: 1, 2, 4 workers, one account each (${RATE} req/s, 50 ms, pages of ${PAGE})`,
      measured,
      references: { 'rate per account (req/s)': RATE, 'page size': PAGE, windowBlocks },
      targets,
      notes: [describeWorkload(w)],
    };
  } finally {
    await Promise.all(sims.map((s) => s.stop()));
    await postgres.stop();
  }
}
