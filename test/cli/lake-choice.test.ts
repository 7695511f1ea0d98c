import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { distributedFlags, resolveLakeTarget } from '../../src/cli/lake-target.js';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { runWorker } from '../../src/distributed/worker.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { chainFor, startSimulator } from '../../src/simulator/index.js';
import { A_SHOWCASE } from '../../src/simulator/token-events.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { runCliCapturing, type CliResult } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

const A = '0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c';
const B = '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157';
const C = '0x86024fd52bd9a84f6ba8cb499555b9ce10959591';

/** A small simulator job of one address's transactions. */
const jobDoc = (name: string, address: string, extra: Record<string, unknown> = {}) => ({
  name,
  network: 'mainnet',
  target: 'simulator',
  simulator: { seed: 1, scale: 'small' },
  range: { fromBlock: 0, toBlock: 'head' },
  datasets: { transactions: { addresses: [address] } },
  ...extra,
});

describe('the lake-choice rule (resolveLakeTarget)', () => {
  const URL_ = 'postgres://chainlake@db/lake';
  it('a flag wins over the environment; the environment fills what no flag says; nothing gives data/lake', () => {
    const both = { CHAINLAKE_LAKE: '/env/lake', CHAINLAKE_CATALOG: URL_, CHAINLAKE_STORE: '/env/store' };
    expect(resolveLakeTarget({ lake: 'data/lake' }, { env: { CHAINLAKE_CATALOG: URL_ } })).toEqual({ kind: 'local', lake: 'data/lake', from: 'flag' });
    expect(resolveLakeTarget({ lake: 'x' }, { env: both })).toEqual({ kind: 'local', lake: 'x', from: 'flag' });
    expect(resolveLakeTarget({ catalog: 'postgres://h/d' }, { env: both })).toEqual({
      kind: 'distributed',
      catalog: 'postgres://h/d',
      store: '/env/store',
      storeConnection: {},
      from: 'flag',
    });
    expect(resolveLakeTarget({ store: '/s' }, { env: both })).toEqual({ kind: 'distributed', catalog: URL_, store: '/s', storeConnection: {}, from: 'env' });
    expect(resolveLakeTarget({}, { env: { CHAINLAKE_CATALOG: URL_ } })).toEqual({
      kind: 'distributed',
      catalog: URL_,
      store: undefined,
      storeConnection: {},
      from: 'env',
    });
    expect(resolveLakeTarget({}, { env: { CHAINLAKE_LAKE: '/env/lake', CHAINLAKE_STORE: '/s' } })).toEqual({ kind: 'local', lake: '/env/lake', from: 'env' });
    expect(resolveLakeTarget({}, { env: both, jobLake: 'job/lake' })).toEqual({ kind: 'local', lake: 'job/lake', from: 'job' });
    // An empty variable (`CHAINLAKE_CATALOG=`) is unset.
    expect(resolveLakeTarget({}, { env: { CHAINLAKE_CATALOG: '', CHAINLAKE_LAKE: ' ' } })).toEqual({ kind: 'local', lake: 'data/lake', from: 'default' });
  });

  it('an object store is reached as the AWS variables say, resolved with the lake: the S3-specific endpoint first, an empty one unset', () => {
    const at = (env: Record<string, string>) => {
      const t = resolveLakeTarget({ catalog: URL_, store: 's3://lake/team' }, { env });
      return t.kind === 'distributed' ? t.storeConnection : undefined;
    };
    expect(at({ AWS_ENDPOINT_URL: 'http://minio:9000', AWS_REGION: 'eu-west-1' })).toEqual({ endpoint: 'http://minio:9000', region: 'eu-west-1' });
    expect(at({ AWS_ENDPOINT_URL_S3: 'http://s3only:9000', AWS_ENDPOINT_URL: 'http://all:9000', AWS_DEFAULT_REGION: 'eu-central-1' })).toEqual({
      endpoint: 'http://s3only:9000',
      region: 'eu-central-1',
    });
    expect(at({ AWS_ENDPOINT_URL_S3: '', AWS_REGION: '', AWS_DEFAULT_REGION: 'ap-south-1' })).toEqual({ region: 'ap-south-1' });
    expect(distributedFlags({ store: 's3://lake' }, { AWS_ENDPOINT_URL: 'http://minio:9000' }).storeConnection).toEqual({ endpoint: 'http://minio:9000' });
  });

  it('two kinds at the same level is a usage error naming both and where each was found', () => {
    const fail = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e as Error & { code: string; hint?: string };
      }
      throw new Error('no error');
    };
    const flags = fail(() => resolveLakeTarget({ lake: 'data/lake', catalog: 'postgres://u:secret@h/d' }, { env: {} }));
    expect(flags.code).toBe('CHAINLAKE_USAGE');
    expect(flags.message).toBe('both --lake data/lake and --catalog postgres://u:***@h/d were given as flags: they name two lakes');
    const env = fail(() => resolveLakeTarget({}, { env: { CHAINLAKE_LAKE: '/l', CHAINLAKE_CATALOG: URL_ } }));
    expect(env.code).toBe('CHAINLAKE_USAGE');
    expect(env.message).toMatch(/the environment names two lakes: CHAINLAKE_LAKE=\/l \(a local lake\) and CHAINLAKE_CATALOG=postgres:\/\/chainlake@db\/lake/);
    expect(env.hint).toMatch(/--lake DIR or --catalog URL/);
    expect(fail(() => resolveLakeTarget({ store: '/s' }, { env: {} })).message).toMatch(/--store \/s was given without a catalog/);
  });
});

describe('every command chooses the lake by the same rule (CLI, real PostgreSQL)', () => {
  let pg: TestPostgres;
  let tmp: Awaited<ReturnType<typeof tempDir>>;
  let db: Awaited<ReturnType<TestPostgres['database']>>;
  let store: string;
  let local: string;

  beforeAll(async () => {
    pg = await startPostgres();
    tmp = await tempDir('chainlake-lake-choice-');
    // A distributed lake of two runs (two snapshots) and a third run whose one window failed.
    db = await pg.database();
    store = path.join(tmp.dir, 'store');
    for (const [name, address] of [
      ['dist-a', A],
      ['dist-b', B],
    ] as const) {
      const doc = jobDoc(name, address);
      await enqueueJob(parseJob(doc, name, process.env), doc, { catalog: db.url, store });
      await runWorker({ catalog: db.url, store, id: name, untilIdle: true, pollMs: 50 });
    }
    const healthy = await startSimulator({ seed: 1, scale: 'small' });
    const failing = await startSimulator({ seed: 1, scale: 'small', faults: { rate: 1, kinds: ['500'] } });
    try {
      const doc = jobDoc('dist-fails', C, { retry: { maxAttempts: 1 } });
      await enqueueJob(parseJob(doc, 'dist-fails', process.env), doc, { catalog: db.url, store, simulator: healthy, queue: { retryLimit: 0 } });
      await runWorker({ catalog: db.url, store, id: 'fails', untilIdle: true, pollMs: 50, simulator: failing });
    } finally {
      await failing.close();
      await healthy.close();
    }
    // A local lake of two runs (two snapshots).
    local = path.join(tmp.dir, 'local');
    for (const [name, address] of [
      ['local-a', A],
      ['local-b', B],
    ] as const)
      await runJob(parseJob(jobDoc(name, address), name, process.env, { lake: local }));
  }, 300_000);

  afterAll(async () => {
    await pg?.stop();
    await tmp?.cleanup();
  });

  const distributedSnapshots = async () => {
    const c = await db.connect();
    try {
      return Number((await c.query(`SELECT count(*) AS n FROM ducklake.ducklake_snapshot`)).rows[0].n);
    } finally {
      await c.end();
    }
  };
  /**
   * A command in this process with `env` over this process's environment (as a child given it would see it),
   * restored afterwards: which lake a command chooses, what it prints and its exit code are the point, not its
   * process.
   */
  const runCli = async (args: string[], opts: { env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> => {
    return runCliCapturing(args, { CHAINLAKE_API_KEY: '', CHAINLAKE_MAINNET_URL: '', ...opts.env });
  };
  const localSnapshots = async () => Number((await queryCatalog(local, `SELECT count(*) AS n FROM ducklake_snapshot`))[0]!.n);

  it('maintain --lake with CHAINLAKE_CATALOG exported tidies the local lake and leaves the distributed one alone', async () => {
    const distBefore = await distributedSnapshots();
    expect(distBefore).toBeGreaterThan(2);
    expect(await localSnapshots()).toBeGreaterThan(1);
    const r = await runCli(['maintain', '--lake', local, '--keep-snapshots', '1'], {
      env: { CHAINLAKE_CATALOG: db.url, CHAINLAKE_STORE: store, PGPASSWORD: pg.password },
    });
    expect(r.code, r.stderr).toBe(0);
    expect(await distributedSnapshots()).toBe(distBefore);
    expect(await localSnapshots()).toBe(1);
    // The output names the lake it tidied, and why that one; what was done is said in the same words for both kinds.
    expect(r.stdout).toMatch(new RegExp(`^the local lake ${local} \\(--lake\\): expired [1-9]\\d* snapshots`));
    const dist = await runCli(['maintain', '--catalog', db.url, '--store', store], { env: { PGPASSWORD: pg.password } });
    expect(dist.code, dist.stderr).toBe(0);
    const done = (out: string) => out.replace(/^the (local|distributed) lake .*?: /, '').replace(/\d+/g, 'N');
    expect(done(dist.stdout)).toBe(done(r.stdout));
    expect(done(r.stdout)).toBe('expired N snapshots, deleted N files no snapshot needs, removed N files nothing refers to\n');
  });

  it('two lakes named at the same level: exit 2 saying which was found where', async () => {
    const flags = await runCli(['maintain', '--lake', local, '--catalog', db.url, '--keep-snapshots', '1'], { env: { CHAINLAKE_CATALOG: '' } });
    expect(flags.code).toBe(2);
    expect(flags.stderr).toContain(`both --lake ${local} and --catalog ${db.url} were given as flags`);
    const env = await runCli(['status'], { env: { CHAINLAKE_LAKE: local, CHAINLAKE_CATALOG: db.url } });
    expect(env.code).toBe(2);
    expect(env.stderr).toContain(`the environment names two lakes: CHAINLAKE_LAKE=${local} (a local lake) and CHAINLAKE_CATALOG=${db.url}`);
  });

  it('status --catalog shows the distributed lake like a local one: datasets, runs, watermarks, and the failed window with its error', async () => {
    // --catalog wins over CHAINLAKE_LAKE.
    const r = await runCli(['status', '--catalog', db.url, '--format', 'json'], {
      env: { CHAINLAKE_LAKE: path.join(tmp.dir, 'nowhere'), PGPASSWORD: pg.password },
    });
    expect(r.code, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout) as Record<string, unknown[]> & { lake: string };
    const l = await runCli(['status', '--lake', local, '--format', 'json']);
    expect(l.code, l.stderr).toBe(0);
    const ls = JSON.parse(l.stdout) as Record<string, unknown[]>;
    expect(Object.keys(s)).toEqual(Object.keys(ls));
    expect(s.lake).toBe(db.url);
    expect(s.datasets).toEqual([expect.objectContaining({ dataset: 'transactions', network: 'mainnet' })]);
    expect(Object.keys(s.runs![0] as object)).toEqual(Object.keys(ls.runs![0] as object));
    // The failed run is not complete (`running` until a worker closes it, then `failed`).
    expect((s.runs as { job: string; status: string; windows_failed: number }[]).map((x) => [x.job, x.status === 'complete', x.windows_failed]).sort()).toEqual(
      [
        ['dist-a', true, 0],
        ['dist-b', true, 0],
        ['dist-fails', false, s.uncoveredFailures!.length],
      ],
    );
    expect((s.runs as { job: string; rows: number }[]).find((x) => x.job === 'dist-a')!.rows).toBeGreaterThan(0);
    expect((s.watermarks as { scope: string }[]).map((w) => w.scope).sort()).toEqual([`address=${A}`, `address=${B}`].sort());
    expect(s.uncoveredFailures!.length).toBeGreaterThan(0);
    for (const f of s.uncoveredFailures!)
      expect(f).toEqual(expect.objectContaining({ dataset: 'transactions', scope: `address=${C}`, error: expect.stringMatching(/500/) }));
    // The table has the same sections.
    const t = await runCli(['status'], { env: { CHAINLAKE_CATALOG: db.url, PGPASSWORD: pg.password } });
    expect(t.code, t.stderr).toBe(0);
    expect(t.stdout).toMatch(/^lake: postgres:\/\/.*\n\ndatasets:\n[\s\S]*last 3 runs:[\s\S]*watermarks:[\s\S]*failed windows not yet fetched again:/);
  });

  /** `sql`'s rows, as `query --format json` prints them, from the lake `args` names. */
  const rowsOf = async (args: string[], sql: string): Promise<Record<string, unknown>[]> => {
    const r = await runCli(['query', ...args, '--format', 'json', sql], { env: { PGPASSWORD: pg.password, CHAINLAKE_CATALOG: '' } });
    expect(r.code, r.stderr).toBe(0);
    return r.stdout
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  };

  it("a window's row counts the same on both kinds of lake: expected rows, retries, throttles, cap hits, splits, attempts; a failed one too", async () => {
    const counts = 'rows_expected, rows_got, rejects, requests, retries, throttles, cap_hits, splits';
    const windowsOf = (job: string) =>
      `SELECT dataset, network, scope, from_block, to_block, ${counts}, attempts, status FROM windows WHERE run_id IN (SELECT run_id FROM runs WHERE job = '${job}') ORDER BY ALL`;
    const dist = await rowsOf(['--catalog', db.url], windowsOf('dist-a'));
    expect(dist.length).toBeGreaterThan(0);
    expect(dist).toEqual(await rowsOf(['--lake', local], windowsOf('local-a')));
    // The window that failed records what its attempt counted, as a single machine's failed window does.
    const failed = await rowsOf(['--catalog', db.url], `SELECT ${counts} FROM windows WHERE status = 'failed'`);
    expect(failed).toEqual([{ rows_expected: 0, rows_got: 0, rejects: 0, requests: 1, retries: 0, throttles: 0, cap_hits: 0, splits: 0 }]);
  });

  it("a run's row names its network, head and range on both kinds of lake", async () => {
    const runsOf = async (args: string[], prefix: string) =>
      (await rowsOf(args, `SELECT job, network, head, range_from, range_to FROM runs WHERE job LIKE '${prefix}%' AND job <> 'dist-fails' ORDER BY job`)).map(
        (r) => ({ ...r, job: String(r.job).replace(prefix, '') }),
      );
    const dist = await runsOf(['--catalog', db.url], 'dist-');
    expect(dist).toEqual([
      { job: 'a', network: 'mainnet', head: expect.any(Number), range_from: 0, range_to: expect.any(Number) },
      { job: 'b', network: 'mainnet', head: expect.any(Number), range_from: 0, range_to: expect.any(Number) },
    ]);
    expect(await runsOf(['--lake', local], 'local-')).toEqual(dist);
  });

  it("a file's run_id is the run whose commit wrote it, on both kinds of lake", async () => {
    // The jobs whose runs wrote the files of each dataset (the second run rewrote the partitions it shares with the first).
    const writers = async (args: string[], prefix: string) =>
      (await rowsOf(args, `SELECT f.dataset, r.job FROM files f LEFT JOIN runs r USING (run_id) GROUP BY ALL ORDER BY ALL`)).map((f) => ({
        ...f,
        job: typeof f.job === 'string' ? f.job.replace(prefix, '') : f.job,
      }));
    const dist = await writers(['--catalog', db.url], 'dist-');
    expect(dist.length).toBeGreaterThan(0);
    expect(dist).toEqual(await writers(['--lake', local], 'local-'));
  });

  it("a job's requests count the same on both kinds of lake, enqueue's head lookup with them: in the run's totals and in request_usage", async () => {
    // A lake of each kind of its own: the runs of the others are counted by the tests above.
    const sim = await startSimulator({ seed: 1, scale: 'small' });
    try {
      // Its decode key takes a contract's ABI from the API: a request outside the windows beside the head lookup.
      const doc = jobDoc('requests', A, {
        dailyRequestQuota: 1_000,
        decode: { contracts: [{ address: chainFor(1, 'small', 'mainnet').addrLower(A_SHOWCASE), name: 'showcase' }] },
      });
      const quotaDb = await pg.database();
      const quotaStore = path.join(tmp.dir, 'requests-store');
      sim.resetStats();
      // The quota's day is the UTC day the database sees: the spent-day check below holds only within one day.
      const day = new Date().toISOString().slice(0, 10);
      // The enqueuing host's key is the account `main`'s, as the worker's.
      const enqueued = await enqueueJob(parseJob(doc, 'requests', process.env), doc, {
        catalog: quotaDb.url,
        store: quotaStore,
        simulator: sim,
        account: 'main',
      });
      expect(enqueued.requests).toBe(sim.stats().requests);
      expect(enqueued.requests).toBe(2);
      await runWorker({ catalog: quotaDb.url, store: quotaStore, id: 'requests', account: 'main', untilIdle: true, pollMs: 50, simulator: sim });
      const distSent = sim.stats().requests;
      sim.resetStats();
      const quotaLocal = path.join(tmp.dir, 'requests-local');
      await runJob(parseJob(doc, 'requests', process.env, { lake: quotaLocal }), { simulator: sim });
      const localSent = sim.stats().requests;
      expect(distSent).toBe(localSent);

      const counted = `SELECT (SELECT CAST(json_extract(report, '$.totals.requests') AS BIGINT) FROM runs) AS totals,
                              (SELECT sum(requests) FROM windows) AS in_windows,
                              (SELECT sum(requests) FROM request_usage) AS usage,
                              (SELECT list(DISTINCT account) FROM request_usage) AS accounts`;
      const [dist] = await rowsOf(['--catalog', quotaDb.url], counted);
      const [local] = await rowsOf(['--lake', quotaLocal], counted);
      // Every request the API saw, in both figures, on both kinds of lake; the head lookup outside the windows.
      expect(dist).toEqual({ totals: distSent, in_windows: distSent - enqueued.requests, usage: distSent, accounts: ['main'] });
      expect(local).toEqual({ ...dist, accounts: ['simulator'] });

      // With the account's day spent, enqueue sends nothing and plans nothing, as a local run at its quota does not start.
      // (Across 00:00 UTC the day spent is yesterday's, and today's quota is whole: nothing to check then.)
      if (new Date().toISOString().slice(0, 10) !== day) return;
      sim.resetStats();
      const spent = { ...doc, dailyRequestQuota: distSent };
      await expect(
        enqueueJob(parseJob(spent, 'requests', process.env), spent, { catalog: quotaDb.url, store: quotaStore, simulator: sim, account: 'main' }),
      ).rejects.toMatchObject({ code: 'CHAINLAKE_QUOTA_REACHED' });
      expect(sim.stats().requests).toBe(0);
      expect(await rowsOf(['--catalog', quotaDb.url], `SELECT count(*) AS runs FROM runs`)).toEqual([{ runs: 1 }]);
    } finally {
      await sim.close();
    }
  });

  it("a commit of two runs' windows names both runs: in its snapshot's message and in each of its files' run_id; each row's _run_id names its own", async () => {
    const twoDb = await pg.database();
    const twoStore = path.join(tmp.dir, 'two-runs-store');
    const runIds: string[] = [];
    for (const [name, address] of [
      ['two-a', A],
      ['two-b', B],
    ] as const) {
      const doc = jobDoc(name, address);
      runIds.push((await enqueueJob(parseJob(doc, name, process.env), doc, { catalog: twoDb.url, store: twoStore })).runId);
    }
    // One worker that commits once everything is fetched: both runs' windows in one batch.
    await runWorker({
      catalog: twoDb.url,
      store: twoStore,
      id: 'both',
      untilIdle: true,
      pollMs: 50,
      commitWhenDone: true,
      commitRows: Number.MAX_SAFE_INTEGER,
      commitWindows: Number.MAX_SAFE_INTEGER,
    });
    const both = [...runIds].sort().join(',');
    const at = ['--catalog', twoDb.url];
    const [batch] = await rowsOf(
      at,
      `SELECT count(DISTINCT snapshot_id) AS snapshots, count(DISTINCT run_id) AS runs, sum(rows_got) AS rows FROM windows WHERE status = 'committed'`,
    );
    expect(batch).toEqual({ snapshots: 1, runs: 2, rows: expect.any(Number) });
    const [message] = await rowsOf(at, `SELECT commit_message FROM ducklake_snapshot_changes WHERE commit_message LIKE '%/commit of %'`);
    expect(message!.commit_message).toMatch(new RegExp(`^${both}/commit of \\d+ fragments$`));
    // Every file of the commit names the commit's runs, whichever run's rows it holds: a file is a partition
    // rewritten by the one commit, and the runs it names join to `runs` by splitting.
    const files = await rowsOf(
      at,
      `SELECT f.path, f.run_id, list(r.job ORDER BY r.job) AS jobs FROM files f JOIN runs r ON list_contains(string_split(f.run_id, ','), r.run_id) GROUP BY ALL`,
    );
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) expect(f).toEqual({ path: expect.any(String), run_id: both, jobs: ['two-a', 'two-b'] });
    // The run that fetched each row is the row's own _run_id.
    const rows = await rowsOf(at, `SELECT _run_id, count(*) AS n FROM transactions GROUP BY ALL ORDER BY ALL`);
    const fetched = await rowsOf(at, `SELECT run_id AS _run_id, sum(rows_got) AS n FROM windows GROUP BY ALL ORDER BY ALL`);
    expect(rows.map((r) => r._run_id)).toEqual([...runIds].sort());
    expect(rows).toEqual(fetched);
  });

  it('query --catalog has the tables a local lake has, with the same columns', async () => {
    // Every table of the ledger a local lake's catalog has, but its commit journal's (`commits`, `lake_meta`): a
    // distributed lake's commits are its snapshots.
    const tables = [
      'runs',
      'windows',
      'watermarks',
      'declared_tables',
      'request_usage',
      'requests',
      'verifications',
      'files',
      '_rejects',
      'ducklake_snapshot',
      'transactions',
    ];
    const columns = async (args: string[], env: NodeJS.ProcessEnv) => {
      const sql = tables.map((t) => `SELECT '${t}' AS t, string_agg(column_name || ' ' || column_type, ', ') AS c FROM (DESCRIBE "${t}")`).join(' UNION ALL ');
      const r = await runCli(['query', ...args, '--format', 'json', sql], { env });
      expect(r.code, r.stderr).toBe(0);
      const rows = r.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { t: string; c: string });
      expect(rows.map((x) => x.t).sort()).toEqual([...tables].sort());
      return Object.fromEntries(rows.map((x) => [x.t, x.c]));
    };
    const dist = await columns(['--catalog', db.url], { PGPASSWORD: pg.password });
    expect(dist).toEqual(await columns(['--lake', local], { CHAINLAKE_CATALOG: db.url }));
    // No flag: CHAINLAKE_CATALOG chooses the distributed lake, as for every command.
    const counts = await runCli(
      [
        'query',
        '--format',
        'json',
        `SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM windows WHERE status = 'failed') AS failed,
                (SELECT count(*) FROM watermarks) AS watermarks, (SELECT count(*) FROM files) AS files,
                (SELECT count(*) FROM _rejects) AS rejects, (SELECT count(*) FROM ducklake_snapshot) AS snapshots`,
      ],
      { env: { CHAINLAKE_CATALOG: db.url, PGPASSWORD: pg.password } },
    );
    expect(counts.code, counts.stderr).toBe(0);
    expect(JSON.parse(counts.stdout)).toEqual({
      runs: 3,
      failed: 1,
      watermarks: 2,
      files: expect.any(Number),
      rejects: 0,
      snapshots: await distributedSnapshots(),
    });
    expect((JSON.parse(counts.stdout) as { files: number }).files).toBeGreaterThan(0);
  });
});
