import type { DuckDBConnection, DuckDBValue } from '@duckdb/node-api';
import type { CommandModule } from 'yargs';
import type { DatasetDef } from '../../datasets/dataset.js';
import { DATASETS, datasetNames } from '../../datasets/registry.js';
import { redactUrl } from '../../distributed/url.js';
import { ident } from '../../load/sql.js';
import { nearestName } from '../../errors.js';
import { CliError } from '../exit-codes.js';
import { resolveLakeTarget, withLakeOptions } from '../lake-target.js';
import { openLakeTables } from '../../lake/open.js';

interface Args {
  dataset: string;
  values?: (string | number)[];
  key?: string[];
  lake?: string;
  catalog?: string;
  store?: string;
  format: 'text' | 'json';
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** A window that brought the row, with its calls. */
export interface ExplainedWindow {
  window: Record<string, Json>;
  requests: Record<string, Json>[];
}

/** The path from a row to the calls that brought it. */
export interface Explanation {
  dataset: string;
  key: Record<string, string>;
  row: Record<string, Json>;
  runId: string | null;
  windows: ExplainedWindow[];
  /** What could not be traced, and why (an old window without an id, a scope no column of the row names). */
  notes: string[];
}

/** The dataset a name means, or a usage error with the closest name. */
export function explainDataset(name: string): DatasetDef {
  const def = Object.hasOwn(DATASETS, name) ? DATASETS[name] : undefined;
  if (def) return def;
  const near = nearestName(name, datasetNames());
  throw new CliError(
    `unknown dataset '${name}'${near ? `: did you mean '${near}'?` : ''}`,
    'CHAINLAKE_UNKNOWN_DATASET',
    `datasets: ${datasetNames().join(', ')}`,
  );
}

/** The key's columns and values: `--key col=value` pairs, or values in the order of the natural key. */
export function explainKey(def: DatasetDef, values: readonly string[], pairs: readonly string[]): Record<string, string> {
  const columns = def.columns.map((c) => c.name);
  const key: Record<string, string> = {};
  if (values.length > 0 && pairs.length > 0) throw new CliError('give the key as values or as --key col=value, not both');
  if (values.length > def.naturalKey.length) {
    throw new CliError(
      `${def.name}'s natural key has ${def.naturalKey.length} column(s) (${def.naturalKey.join(', ')}), ${values.length} values were given`,
      'CHAINLAKE_USAGE',
      'give the values in the order of the natural key, or name the columns with --key col=value',
    );
  }
  values.forEach((v, i) => (key[def.naturalKey[i]!] = v));
  for (const p of pairs) {
    const at = p.indexOf('=');
    if (at <= 0) throw new CliError(`--key ${p}: expected col=value`, 'CHAINLAKE_USAGE', `e.g. --key ${def.naturalKey[0]}=…`);
    const column = p.slice(0, at);
    if (!columns.includes(column)) {
      const near = nearestName(column, columns);
      throw new CliError(
        `--key ${p}: ${def.name} has no column '${column}'${near ? `: did you mean '${near}'?` : ''}`,
        'CHAINLAKE_USAGE',
        `natural key: ${def.naturalKey.join(', ')}`,
      );
    }
    key[column] = p.slice(at + 1);
  }
  if (Object.keys(key).length === 0) {
    throw new CliError(
      `which row of ${def.name}? give its natural key (${def.naturalKey.join(', ')})`,
      'CHAINLAKE_USAGE',
      `e.g. chainlake explain ${def.name} <${def.naturalKey.join('> <')}>`,
    );
  }
  return key;
}

const json = (v: unknown): Json => {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString();
  if (v instanceof Date) return v.toISOString();
  if (typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean') return v;
  if (Array.isArray(v)) return v.map(json);
  if (typeof v === 'object') return String(v as object);
  return String(v);
};

async function rows(conn: DuckDBConnection, sql: string, params: DuckDBValue[] = []): Promise<Record<string, Json>[]> {
  const reader = await conn.runAndReadAll(sql, params);
  return reader.getRowObjectsJS().map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, json(v)])));
}

async function hasRelation(conn: DuckDBConnection, name: string, column?: string): Promise<boolean> {
  const found = await rows(
    conn,
    `SELECT count(*) AS n FROM duckdb_columns() WHERE table_name = $1 AND schema_name = 'main'${column ? ' AND column_name = $2' : ''}`,
    column ? [name, column] : [name],
  );
  return Number(found[0]?.n) > 0;
}

/** Whether a window's scope (`k=v&k2=a,b`) names values the row holds: each part one of its values (any of a list). */
function scopeNamesRow(scope: string, values: ReadonlySet<string>): boolean {
  if (scope === '-' || scope === '') return true;
  return scope.split('&').every((part) => {
    const v = part.slice(part.indexOf('=') + 1);
    return v.split(',').some((x) => values.has(x.toLowerCase()));
  });
}

/**
 * The row of `def` with `key`, the windows of the run that wrote it which brought it, and their calls. A row
 * carries the run that last wrote it (`_run_id`); its windows are that run's committed windows of the dataset and
 * network whose block range holds the row's block (every window, for a dataset without blocks) and whose scope
 * the row names (a transaction two scoped addresses share was listed by both windows: both are printed).
 */
export async function explainRow(conn: DuckDBConnection, def: DatasetDef, key: Record<string, string>): Promise<Explanation> {
  const row = await theRow(conn, def, key);
  const notes: string[] = [];
  const runId = typeof row._run_id === 'string' ? row._run_id : null;
  const explanation: Explanation = { dataset: def.name, key, row, runId, windows: [], notes };
  if (runId === null) {
    notes.push('the row carries no _run_id: the run that wrote it is unknown');
    return explanation;
  }
  const windows = await windowsOf(conn, def, row, runId, notes);
  const ledger = await hasRelation(conn, 'requests');
  if (!ledger) notes.push('this lake has no requests table (written before lineage): windows are shown without their calls');
  for (const w of windows) {
    let requests: Record<string, Json>[] = [];
    if (ledger && w.window_id !== null) {
      requests = await rows(
        conn,
        `SELECT seq, endpoint, method, path, params, http_status, attempts, rows, bytes, body_sha256, sent_at, error FROM requests
         WHERE run_id = $1 AND window_id = $2 ORDER BY seq`,
        [runId, String(w.window_id)],
      );
    } else if (ledger) notes.push(`a window of scope ${String(w.scope)} was recorded before windows had ids: its calls cannot be told`);
    explanation.windows.push({ window: w, requests });
  }
  return explanation;
}

/** The one row of `def` with `key` (matched without regard to case), or a usage error saying what to give instead. */
async function theRow(conn: DuckDBConnection, def: DatasetDef, key: Record<string, string>): Promise<Record<string, Json>> {
  const entries = Object.entries(key);
  const where = entries.map(([c], i) => `lower(CAST(${ident(c)} AS VARCHAR)) = lower($${i + 1})`).join(' AND ');
  const found = await rows(
    conn,
    `SELECT * FROM ${ident(def.name)} WHERE ${where} LIMIT 11`,
    entries.map(([, v]) => v),
  );
  const shown = entries.map(([c, v]) => `${c} = ${v}`).join(', ');
  if (found.length === 0) {
    throw new CliError(
      `no row of ${def.name} has ${shown}`,
      'CHAINLAKE_USAGE',
      `the natural key of ${def.name} is (${def.naturalKey.join(', ')}); \`chainlake query "SELECT ${def.naturalKey.join(', ')} FROM ${def.name} LIMIT 5"\` shows some`,
    );
  }
  if (found.length > 1) {
    const rest = def.naturalKey.filter((c) => !(c in key));
    throw new CliError(
      `${found.length > 10 ? 'more than 10' : found.length} rows of ${def.name} have ${shown}`,
      'CHAINLAKE_USAGE',
      `give the rest of the natural key too: ${rest.join(', ') || '(all given: the lake holds duplicates)'}`,
    );
  }
  return found[0]!;
}

/**
 * The committed windows of run `runId` that brought `row`: those whose range holds its block and whose scope it
 * names, or every one whose range holds it when none names it (said in `notes`).
 */
async function windowsOf(conn: DuckDBConnection, def: DatasetDef, row: Record<string, Json>, runId: string, notes: string[]): Promise<Record<string, Json>[]> {
  const block = def.blockColumn !== undefined && typeof row[def.blockColumn] === 'number' ? (row[def.blockColumn] as number) : undefined;
  const withId = await hasRelation(conn, 'windows', 'window_id');
  const candidates = await rows(
    conn,
    `SELECT ${withId ? 'window_id' : 'NULL AS window_id'}, run_id, dataset, network, scope, from_block, to_block, status, rows_expected, rows_got, requests, committed_at
     FROM windows WHERE run_id = $1 AND dataset = $2 AND network = $3 AND status = 'committed'
       ${block === undefined ? '' : `AND (from_block IS NULL OR ${block} BETWEEN from_block AND to_block)`}
     ORDER BY scope, from_block`,
    [runId, def.name, String(row.network)],
  );
  const values = new Set(Object.values(row).flatMap((v) => (v === null ? [] : [String(v).toLowerCase()])));
  const named = candidates.filter((w) => scopeNamesRow(String(w.scope), values));
  if (candidates.length === 0) notes.push(`no committed window of run ${runId} holds this row's ${block === undefined ? 'scope' : `block ${block}`}`);
  else if (named.length === 0) notes.push(`no column of the row names the scope of a window of run ${runId}: every window whose range holds it is listed`);
  return named.length > 0 ? named : candidates;
}

function formatExplanation(e: Explanation): string {
  const out: string[] = [];
  out.push(
    `${e.dataset} row (${Object.entries(e.key)
      .map(([c, v]) => `${c} = ${v}`)
      .join(', ')}):`,
  );
  const width = Math.max(...Object.keys(e.row).map((k) => k.length));
  for (const [k, v] of Object.entries(e.row)) out.push(`  ${k.padEnd(width)}  ${v === null ? 'NULL' : typeof v === 'object' ? JSON.stringify(v) : String(v)}`);
  out.push('');
  out.push(`written by run ${e.runId ?? '(unknown)'}, in ${e.windows.length} window${e.windows.length === 1 ? '' : 's'}:`);
  for (const { window: w, requests } of e.windows) {
    const range = w.from_block === null ? 'no block range' : `blocks ${String(w.from_block)}-${String(w.to_block)}`;
    out.push(`  window ${String(w.window_id ?? '(no id)')}`);
    out.push(`    run ${String(w.run_id)}, scope ${String(w.scope)}, ${range}, ${String(w.status)}${w.committed_at ? ` at ${String(w.committed_at)}` : ''}`);
    out.push(`    ${String(w.rows_got)} rows${w.rows_expected === null ? '' : ` of ${String(w.rows_expected)} counted`}, ${String(w.requests)} requests`);
    for (const r of requests) {
      const status = r.http_status === null ? 'no response' : `HTTP ${String(r.http_status)}`;
      out.push(
        `    #${String(r.seq)} ${String(r.endpoint)}: ${String(r.method)} ${String(r.path)} ${String(r.params)} -> ${status}, ${String(r.attempts)} attempt${r.attempts === 1 ? '' : 's'}, ${r.rows === null ? '-' : String(r.rows)} rows, ${r.bytes === null ? '-' : String(r.bytes)} bytes, sha256 ${r.body_sha256 === null ? '-' : String(r.body_sha256)}, sent ${String(r.sent_at)}${r.error ? `, failed: ${String(r.error)}` : ''}`,
      );
    }
  }
  for (const n of e.notes) out.push(`note: ${n}`);
  return out.join('\n');
}

export const explainCommand: CommandModule<object, Args> = {
  command: 'explain <dataset> [values..]',
  describe: "Trace a row to the window that brought it and that window's requests (lineage)",
  builder: (y) =>
    withLakeOptions(
      y
        .positional('dataset', { type: 'string', demandOption: true, describe: 'The dataset of the row, e.g. transactions' })
        .positional('values', { type: 'string', array: true, describe: "The row's natural key, its columns in order (describe lists them)" })
        .option('key', {
          alias: 'k',
          type: 'string',
          array: true,
          describe: 'A key column and its value, col=value (repeatable), instead of positional values',
        })
        .option('format', { choices: ['text', 'json'] as const, default: 'text' as const, describe: 'text for a person, json for a program' }),
      { distributed: true },
    )
      .example('$0 explain transactions 0xabc…', 'The window and requests that brought a transaction')
      .example('$0 explain event_logs 0xabc… 3 --format json', 'A composite key (transaction hash, log index), as JSON')
      .example('$0 explain balances -k address=0x36b8…', 'A key by column name'),
  handler: async (args) => {
    const def = explainDataset(args.dataset);
    const key = explainKey(def, (args.values ?? []).map(String), (args.key ?? []).map(String));
    const target = resolveLakeTarget(args);
    const lake = target.kind === 'local' ? target.lake : redactUrl(target.catalog);
    const reader = await openLakeTables(target);
    try {
      const e = await explainRow(reader.conn, def, key);
      process.stdout.write((args.format === 'json' ? JSON.stringify({ lake, ...e }, null, 2) : formatExplanation(e)) + '\n');
    } finally {
      reader.close();
    }
  },
};
