/**
 * Which lake a command works on: ONE rule for every command, so that `maintain` can never tidy one lake while
 * `query` reads another.
 *
 * A lake is either local (`--lake DIR`: a folder with its catalog.duckdb) or distributed (`--catalog URL`, a
 * PostgreSQL control plane, with `--store` where its files are). The rule, in order:
 *
 * 1. Flags: `--lake` chooses the local lake, `--catalog` (or `--store` alone) the distributed one. Both `--lake`
 *    and `--catalog` is a usage error (exit 2).
 * 2. A job file that names its `lake` (run, plan, decode --job) chooses that local lake.
 * 3. The environment, only for what no flag says: `CHAINLAKE_LAKE` names a local lake, `CHAINLAKE_CATALOG` a
 *    distributed one. Both set (and no flag to choose) is a usage error (exit 2).
 * 4. Nothing at all: the local lake `data/lake`.
 *
 * `CHAINLAKE_STORE` fills `--store` of a distributed lake chosen either way. An explicit flag always wins over
 * the environment: `--lake data/lake` with `CHAINLAKE_CATALOG` exported is the local lake; `--catalog URL` with
 * `CHAINLAKE_LAKE` exported is the distributed one. Commands that work on one kind only read that kind's
 * settings (`run` a local lake, `worker` a distributed one); every other command works on either kind.
 *
 * A distributed lake's store on object storage is reached as the usual AWS variables say (AWS_ENDPOINT_URL_S3 or
 * AWS_ENDPOINT_URL, AWS_REGION or AWS_DEFAULT_REGION): resolved here with the rest, and handed down.
 */
import { storeConnectionFrom, type StoreConnection } from '../distributed/store.js';
import { redactUrl } from '../distributed/url.js';
import type { Argv } from 'yargs';
import { CliError } from './exit-codes.js';

export const DEFAULT_LAKE = 'data/lake';
export const LAKE_ENV = 'CHAINLAKE_LAKE';
export const CATALOG_ENV = 'CHAINLAKE_CATALOG';
export const STORE_ENV = 'CHAINLAKE_STORE';

/** Where the choice came from: named in messages, so a user sees why this lake and not another. */
export type LakeSource = 'flag' | 'job' | 'env' | 'default';

export type LakeTarget =
  | { kind: 'local'; lake: string; from: LakeSource }
  | { kind: 'distributed'; catalog: string; store?: string; storeConnection: StoreConnection; from: Exclude<LakeSource, 'job' | 'default'> };

export interface LakeFlags {
  lake?: string;
  catalog?: string;
  store?: string;
}

/** A value of the environment, where an empty one (`CHAINLAKE_CATALOG=`) counts as unset. */
function envValue(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v;
}

/** The lake the rule (see this module's comment) chooses from the flags, the job file's `lake` and the environment. */
export function resolveLakeTarget(flags: LakeFlags, opts: { env?: NodeJS.ProcessEnv; jobLake?: string } = {}): LakeTarget {
  const env = opts.env ?? process.env;
  if (flags.lake !== undefined && flags.catalog !== undefined) {
    throw new CliError(
      `both --lake ${flags.lake} and --catalog ${redactUrl(flags.catalog)} were given as flags: they name two lakes`,
      'CHAINLAKE_USAGE',
      'give --lake DIR for a local lake, or --catalog URL (with --store) for a distributed one, not both',
    );
  }
  if (flags.lake !== undefined && flags.store !== undefined) {
    throw new CliError(
      `--store ${flags.store} goes with a distributed lake (--catalog), but --lake ${flags.lake} names a local one`,
      'CHAINLAKE_USAGE',
      'drop --store for the local lake, or give --catalog URL instead of --lake',
    );
  }
  if (flags.lake !== undefined) return { kind: 'local', lake: flags.lake, from: 'flag' };
  const envStore = envValue(env, STORE_ENV);
  const storeConnection = storeConnectionFrom(env);
  if (flags.catalog !== undefined) return { kind: 'distributed', catalog: flags.catalog, store: flags.store ?? envStore, storeConnection, from: 'flag' };
  const envCatalog = envValue(env, CATALOG_ENV);
  if (flags.store !== undefined) {
    if (envCatalog === undefined)
      throw new CliError(
        `--store ${flags.store} was given without a catalog: --store goes with a distributed lake`,
        'CHAINLAKE_USAGE',
        `give --catalog postgres://user@host/db (or set ${CATALOG_ENV}), or --lake DIR for a local lake`,
      );
    return { kind: 'distributed', catalog: envCatalog, store: flags.store, storeConnection, from: 'env' };
  }
  if (opts.jobLake !== undefined) return { kind: 'local', lake: opts.jobLake, from: 'job' };
  const envLake = envValue(env, LAKE_ENV);
  if (envLake !== undefined && envCatalog !== undefined) {
    throw new CliError(
      `the environment names two lakes: ${LAKE_ENV}=${envLake} (a local lake) and ${CATALOG_ENV}=${redactUrl(envCatalog)} (a distributed one), and no flag chooses`,
      'CHAINLAKE_USAGE',
      `give --lake DIR or --catalog URL to choose, or unset one of ${LAKE_ENV} and ${CATALOG_ENV}`,
    );
  }
  if (envCatalog !== undefined) return { kind: 'distributed', catalog: envCatalog, store: envStore, storeConnection, from: 'env' };
  if (envLake !== undefined) return { kind: 'local', lake: envLake, from: 'env' };
  return { kind: 'local', lake: DEFAULT_LAKE, from: 'default' };
}

/** The chosen lake in words, with where the choice came from: "the distributed lake postgres://… ($CHAINLAKE_CATALOG)". */
export function describeTarget(t: LakeTarget): string {
  if (t.kind === 'local') {
    const why = t.from === 'flag' ? '--lake' : t.from === 'job' ? "the job file's lake" : t.from === 'env' ? `$${LAKE_ENV}` : 'the default';
    return `the local lake ${t.lake} (${why})`;
  }
  return `the distributed lake ${redactUrl(t.catalog)} (${t.from === 'flag' ? '--catalog' : `$${CATALOG_ENV}`})`;
}

/**
 * For a command that works on a distributed lake only (enqueue, worker): its catalog and store, from flag or
 * environment, and how to reach the store.
 */
export function distributedFlags(
  flags: LakeFlags,
  env: NodeJS.ProcessEnv = process.env,
): { catalog?: string; store?: string; storeConnection: StoreConnection } {
  return { catalog: flags.catalog ?? envValue(env, CATALOG_ENV), store: flags.store ?? envValue(env, STORE_ENV), storeConnection: storeConnectionFrom(env) };
}

const LAKE_DESCRIBE = `Local lake directory (default: $${LAKE_ENV}, else ${DEFAULT_LAKE}; see "Which lake" in the README)`;
const CATALOG_DESCRIBE = "PostgreSQL URL of a distributed lake's control plane (postgres://user@host/db; the password from PGPASSWORD or ~/.pgpass)";

/**
 * `--lake`, `--catalog` and `--store` without yargs defaults: a default filled from the environment could not be
 * told from a flag the user typed, and the flag must win (resolveLakeTarget).
 */
export function withLakeOptions<T>(y: Argv<T>, opts: { distributed: boolean; lakeDescribe?: string }) {
  const withLake = y.option('lake', { type: 'string', describe: opts.lakeDescribe ?? LAKE_DESCRIBE });
  return withLake
    .option('catalog', {
      type: 'string',
      defaultDescription: `$${CATALOG_ENV}`,
      describe: opts.distributed ? `${CATALOG_DESCRIBE} (instead of --lake)` : `${CATALOG_DESCRIBE}: refused, this command works on a local lake`,
    })
    .option('store', {
      type: 'string',
      defaultDescription: `$${STORE_ENV}`,
      describe: "With --catalog: where the lake's files are, as this machine reaches them (a shared directory or s3://bucket/prefix)",
    });
}
