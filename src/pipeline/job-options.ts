import { DEFAULT_RETRY, DEFAULT_TIMEOUTS } from '../extract/transport.js';

/**
 * The scalar options of a job file, declared once: type, bounds, default and the words that explain them. The job
 * file's JSON Schema (job-schema.ts), the parser's checks and defaults (job.ts), the command line's bounds
 * (cli/common.ts) and the generated reference (docs/job-reference.md, job-reference.ts) are all derived from here,
 * so a bound or a default is changed in one place.
 */
export interface IntOption {
  kind: 'int';
  min: number;
  max?: number;
  default?: number;
  /** The default in words, where it is not one value. */
  none?: string;
  doc: string;
}
export type JobOption =
  | IntOption
  | { kind: 'bool'; default: boolean; doc: string }
  | { kind: 'enum'; values: readonly string[]; default?: string; none?: string; doc: string }
  | { kind: 'string'; pattern?: string; default?: string; none?: string; doc: string };

/** The value a job file gives an option. */
export type OptionValue<O> = O extends { kind: 'int' }
  ? number
  : O extends { kind: 'bool' }
    ? boolean
    : O extends { kind: 'enum'; values: readonly (infer V)[] }
      ? V
      : string;
/** A group's options as a job file holds them: every key optional. */
export type OptionValues<G> = { -readonly [K in keyof G]?: OptionValue<G[K]> };

const int = (min: number, max: number | undefined, dflt: number | undefined, doc: string, none?: string): IntOption => ({
  kind: 'int',
  min,
  ...(max === undefined ? {} : { max }),
  ...(dflt === undefined ? {} : { default: dflt }),
  ...(none === undefined ? {} : { none }),
  doc,
});

/** Options at the top level of a job file. */
export const TOP_OPTIONS = {
  name: {
    kind: 'string',
    pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]*$',
    none: "the job file's name without .json (`job` for a job from the command line)",
    doc: "The job's name: a run resumes the unfinished run of the same job; two jobs of one lake keep their own runs and watermarks.",
  },
  network: { kind: 'enum', values: ['mainnet', 'testnet'], default: 'mainnet', doc: 'Which chain the explorer datasets are read from.' },
  target: {
    kind: 'enum',
    values: ['api', 'simulator'],
    default: 'api',
    doc: 'The real APIs (`endpoints`, or the CHAINLAKE_*_URL variables) or the embedded simulator (`simulator`).',
  },
  lake: {
    kind: 'string',
    default: 'data/lake',
    doc: 'The lake folder (relative to the working directory). A `--lake`/`--catalog` flag, then this, then CHAINLAKE_LAKE / CHAINLAKE_CATALOG choose the lake.',
  },
  apiKey: {
    kind: 'string',
    none: 'CHAINLAKE_API_KEY',
    doc: 'The API key. Prefer CHAINLAKE_API_KEY: a key in a file is easy to leak. Never logged, printed or stored.',
  },
  concurrency: int(1, 256, 8, 'Requests in flight at once across the run (`--concurrency` overrides it).'),
  rps: int(1, 100_000, undefined, 'Requests per second across the run (`--rps` overrides it).', 'no limit but the API’s own (429s are obeyed)'),
  burst: int(1, 10_000, undefined, 'Requests the rate limiter may send at once above `rps`.', 'a tenth of rps'),
  strict: {
    kind: 'bool',
    default: false,
    doc: 'A window with rows that did not convert fails (exit 3) instead of committing them to `_rejects` (`--strict`).',
  },
  pageSize: int(1, 1000, 1000, 'Entries asked for per page (`limit`); the API allows at most 1000.'),
  resultWindow: int(1, undefined, 10_000, 'The deepest entry the API serves by offset (offset + limit); a window holding more is split by block range.'),
  schedule: {
    kind: 'string',
    none: 'none: `chainlake schedule` needs one (or `--cron`)',
    doc: 'Cron expression, UTC (5 fields, or 6 with seconds), for `chainlake schedule`.',
  },
  dailyRequestQuota: int(
    1,
    undefined,
    undefined,
    "The API plan's requests per UTC day: a run stops cleanly at it (exit 4) and `chainlake plan` shows a run's share of it.",
    'no quota',
  ),
} as const satisfies Record<string, JobOption>;

/** Options inside `range`. */
export const RANGE_OPTIONS = {
  fromBlock: int(0, undefined, 0, 'The first block of the range.'),
  toBlock: int(0, undefined, undefined, 'The last block of the range, or "head".', '"head" (the chain head when the run starts)'),
  incremental: { kind: 'bool', default: false, doc: 'Each run starts after the last committed block of each scope (its watermark) and runs to the head.' },
  finalityDepth: int(
    0,
    1_000_000,
    undefined,
    'Blocks below the head not yet final: windows above head − depth are committed as provisional, fetched again by the next run and their rows replaced (`--finality-depth`).',
    '64 on mainnet and testnet (two epochs of an Ethereum-like chain), 0 against the simulator',
  ),
  safetyMarginBlocks: int(0, 1_000_000, 12, 'An incremental run fetches each scope again from this many blocks below its watermark.'),
  windowBlocks: int(
    1,
    undefined,
    undefined,
    'Fixed windows: each scope is fetched in chunks of this many blocks (aligned), each chunk asked even when empty (`--window-blocks`).',
    "count-sized windows: each scope's range is asked at once and cut by the first page's count",
  ),
  head: int(0, undefined, undefined, 'The chain head as you know it: nothing is asked to find it (a service without blocks/latest).', 'asked of the API'),
  headHint: int(
    0,
    undefined,
    undefined,
    'Where a search for the head starts when blocks/latest is refused and the lake records no earlier head.',
    'the head the lake last recorded',
  ),
} as const satisfies Record<string, JobOption>;

/** Options inside `commit`. */
export const COMMIT_OPTIONS = {
  everyRows: int(
    1,
    undefined,
    500_000,
    'A run commits what it has fetched once this many rows wait (a killed run keeps what it committed); a dataset with windows still to fetch may wait for its next batch while fewer than this many rows stay uncommitted, so that a batch does not rewrite what the last one wrote.',
  ),
  everySeconds: int(
    1,
    undefined,
    60,
    'A run commits what it has fetched at least this often, in seconds; a fetched window held back for its dataset (see everyRows) waits at most about twice this.',
  ),
} as const satisfies Record<string, JobOption>;

/** Options inside `retry` (every call of the run). */
export const RETRY_OPTIONS = {
  maxAttempts: int(1, 100, DEFAULT_RETRY.maxAttempts, 'Attempts of one call before its window fails.'),
  baseDelayMs: int(1, 600_000, DEFAULT_RETRY.baseDelayMs, 'The first retry’s delay; each next one doubles it (with jitter).'),
  maxDelayMs: int(1, 3_600_000, DEFAULT_RETRY.maxDelayMs, 'The longest delay between two attempts (a Retry-After is obeyed up to it).'),
  maxTotalDelayMs: int(0, 86_400_000, DEFAULT_RETRY.maxTotalDelayMs, 'The longest a call waits in retries in all.'),
} as const satisfies Record<string, JobOption>;

/** Options inside `timeouts` (every call of the run). */
export const TIMEOUT_OPTIONS = {
  connectMs: int(1, 600_000, DEFAULT_TIMEOUTS.connectMs, 'Connecting to the API.'),
  headersMs: int(1, 3_600_000, DEFAULT_TIMEOUTS.headersMs, 'From the request sent to the response headers.'),
  bodyMs: int(1, 3_600_000, DEFAULT_TIMEOUTS.bodyMs, 'Silence while the body arrives.'),
  totalMs: int(1, 86_400_000, DEFAULT_TIMEOUTS.totalMs, 'One attempt from start to end.'),
} as const satisfies Record<string, JobOption>;

/** The upper bound of an int option, or none. */
export function maxOf(o: JobOption): number | undefined {
  return o.kind === 'int' ? o.max : undefined;
}

/** The JSON Schema of one option: its type and bounds, a description and its default (a value, or in words). */
export function optionSchema(o: JobOption): Record<string, unknown> {
  const base: Record<string, unknown> =
    o.kind === 'int'
      ? { type: 'integer', minimum: o.min, ...(o.max === undefined ? {} : { maximum: o.max }) }
      : o.kind === 'bool'
        ? { type: 'boolean' }
        : o.kind === 'enum'
          ? { enum: [...o.values] }
          : { type: 'string', ...(o.pattern === undefined ? {} : { pattern: o.pattern }) };
  const none = 'none' in o && o.none !== undefined ? ` Default: ${o.none}.` : '';
  return { ...base, description: `${o.doc}${none}`, ...(o.default === undefined ? {} : { default: o.default }) };
}

/** The schemas of a group of options, by key. */
export function groupSchema(group: Record<string, JobOption>): Record<string, Record<string, unknown>> {
  return Object.fromEntries(Object.entries(group).map(([k, o]) => [k, optionSchema(o)]));
}

/** `{ key: default }` of a group's options that have a default value. */
export function defaultsOf<G extends Record<string, JobOption>>(group: G): { [K in keyof G]: G[K] extends { default: infer D } ? D : undefined } {
  return Object.fromEntries(Object.entries(group).map(([k, o]) => [k, o.default])) as never;
}

/**
 * A job as its JSON file holds it (see `jobs/` and `chainlake schema`), typed from the declarations above. The
 * nested lists (dataset scopes, `decode`, `paths`) are checked by the parser (job.ts) with the dataset registry.
 */
export type JobDocument = OptionValues<typeof TOP_OPTIONS> & {
  $schema?: string;
  description?: string;
  simulator?: { seed?: number; scale?: 'small' | 'medium' | 'large'; dialect?: 'spec' | 'real'; chain?: 'demo' | 'sparse' };
  endpoints?: { mainnet?: string; testnet?: string; testnetAlt?: string; finance?: string };
  range?: Omit<OptionValues<typeof RANGE_OPTIONS>, 'toBlock'> & { toBlock?: number | 'head' };
  commit?: OptionValues<typeof COMMIT_OPTIONS>;
  retry?: OptionValues<typeof RETRY_OPTIONS>;
  timeouts?: OptionValues<typeof TIMEOUT_OPTIONS>;
  /** Endpoint id (`chainlake describe --endpoints`) → a path that replaces its default. */
  paths?: Record<string, string>;
  /** Decoded-event datasets written in the same run (README, "Decoded events"). */
  decode?: Record<string, unknown>;
  /** Dataset name → its scopes and options, as `chainlake describe <dataset>` lists them. */
  datasets: Record<string, Record<string, unknown>>;
};
