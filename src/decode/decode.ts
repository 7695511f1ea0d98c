// Decoding a set of event_logs rows into the decoded datasets' rows and rejects, as temp tables of the
// engine. Logs are grouped by topic_0: every dataset source with that topic_0 (whose contract filter the log
// passes) is tried in order and the first that fits takes the log; a log no source fits is one reject naming
// every source's reason. A group whose sources DuckDB can decode is decoded in SQL; others in JavaScript.
// A log of a standard dataset's topic_0 that fits none because it has another standard's shape (an ERC-721
// Transfer when only ERC-20 is decoded) is no reject: it is skipped and counted (STANDARD_SHAPES).

import type { DuckDBConnection } from '@duckdb/node-api';
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { once } from 'node:events';
import { ident, literal, literalList } from '../load/sql.js';
import { signatureText } from './abi.js';
import { allColumns, STANDARD, STANDARD_SHAPES, type DecodedDataset, type EventSource } from './datasets.js';
import { decodeLog, finalTypes, stagedSpec } from './js.js';
import { BIG_MARK, decodeItems, decodePrelude, reasonSql, sqlDecodable, topicCount } from './sql.js';

const isWideUint = (t: string): boolean => t === 'uint' || Number(t.slice(4)) > 64;

export interface DecodeInput {
  conn: DuckDBConnection;
  /** A relation of event_logs rows (the lake's columns). */
  logs: string;
  datasets: readonly DecodedDataset[];
  runId: string;
  ingestedAt: string;
  /** A folder for staged JSON (created). */
  workDir: string;
  /**
   * Names of the output tables: `<prefix><i>` (default `__decode_out_`). Plain tables of the shared in-memory
   * database, so a decoding whose tables must outlive another's (pipeline/decode-in-run.ts) needs a prefix of its own.
   */
  prefix?: string;
  /** Output tables as TEMP tables (a reader's connection, whose default database may be a catalog attached read-only). */
  temporary?: boolean;
}

export interface DecodeOutput {
  /** Temp table of each dataset's fresh rows (its columns plus `__partition`), by dataset name. */
  tables: Map<string, string>;
  rows: Map<string, number>;
  /** Temp table of rejects in the shape of `_rejects` (without the run columns). */
  rejects: string;
  rejectCount: number;
  /** Logs read. */
  logs: number;
  /** Logs of another standard's shape, skipped, by that shape's label (`erc721 Transfer`). */
  skipped: Map<string, number>;
  /** Datasets whose rows are in the order of the logs read: one SQL statement filled each (see decodeInJs for the others). */
  ordered: Set<string>;
}

interface Member {
  d: DecodedDataset;
  s: EventSource;
  table: string;
}

const LOGS = '__decode_logs';
const CAND = '__decode_candidates';
const REJ = '__decode_rejects';
const JS_CHUNK = 20_000;

export const filterSql = (d: DecodedDataset): string => (d.contracts?.length ? `address IN (${d.contracts.map(literal).join(', ')})` : 'true');

/** A shape of log (topics, data words) that is another standard's event: skipped, not rejected. */
interface OtherShape {
  label: string;
  topics: number;
  dataWords: number;
}

const shapeOf = (s: EventSource): { topics: number; dataWords: number } => ({
  topics: topicCount(s),
  dataWords: s.event.inputs.filter((p) => !(p as { indexed?: boolean }).indexed).length,
});

/**
 * The shapes of the standard events of `topic0` that no member decodes, when a member is a standard dataset
 * (those read every contract's logs of their topic_0; a contract's own ABI dataset reads only its logs, so one
 * that does not fit it stays a reject).
 */
function otherShapes(topic0: string, members: readonly Member[]): OtherShape[] {
  if (!members.some((m) => STANDARD[m.d.name])) return [];
  const own = members.map((m) => shapeOf(m.s));
  return STANDARD_SHAPES.filter((x) => x.source.topic0 === topic0 && !members.some((m) => m.d.name === x.dataset))
    .map((x) => ({ label: x.label, ...shapeOf(x.source) }))
    .filter((x) => !own.some((o) => o.topics === x.topics && o.dataWords === x.dataWords));
}

/**
 * SQL giving the label of the other standard's shape a candidate log has (NULL: none), over columns `__topics`,
 * `data` and `address`; a log a non-standard member may take (its contract filter) is that member's to reject.
 */
function otherShapeSql(shapes: readonly OtherShape[], members: readonly Member[], filters: readonly string[]): string {
  const mine = members.flatMap((m, i) => (STANDARD[m.d.name] ? [] : [`(${filters[i]})`]));
  const whens = shapes.map((x) => `WHEN __topics = ${x.topics} AND length(coalesce(data, '0x')) = ${2 + 64 * x.dataWords} THEN ${literal(x.label)}`);
  return `CASE ${mine.length ? `WHEN ${mine.join(' OR ')} THEN NULL ` : ''}${whens.join(' ')} END`;
}

/**
 * One decoding's state, which its steps share: the statements that filled each output table (rows of one SQL
 * statement over the logs keep the logs' order), the logs skipped as another standard's shape, and the SQL every
 * member's rows and rejects are written with.
 */
class DecodeRun {
  readonly fills = new Map<string, number>();
  readonly skipped = new Map<string, number>();

  constructor(readonly input: DecodeInput) {}

  get conn(): DuckDBConnection {
    return this.input.conn;
  }

  filled(table: string, n = 1): void {
    this.fills.set(table, (this.fills.get(table) ?? 0) + n);
  }

  skip(label: string, n: number): void {
    this.skipped.set(label, (this.skipped.get(label) ?? 0) + n);
  }

  /** The columns every decoded row has (the log's, the run's, the partition), from log columns prefixed `p`. */
  commonItems(m: Member, p = ''): string[] {
    return [
      `${p}address AS ${ident(m.d.contractColumn)}`,
      `${p}"timestamp" AS "timestamp"`,
      `${p}transaction_hash AS transaction_hash`,
      `${p}transaction_index AS transaction_index`,
      `${p}log_index AS log_index`,
      ...(m.d.sources.length > 1 ? [`${literal(m.s.label)} AS "event"`] : []),
      `${literal(this.input.runId)} AS _run_id`,
      `CAST(${literal(this.input.ingestedAt)} AS TIMESTAMPTZ) AS _ingested_at`,
      `strftime(${p}"timestamp", '%Y-%m-%d') AS __partition`,
    ];
  }

  /** The statement rejecting the logs of `from` (as `first`'s dataset's) with the reason `reason` (an SQL expression). */
  rejectInsert(first: Member, reason: string, from: string): string {
    return `INSERT INTO ${REJ} SELECT ${literal(first.d.name)}, ${literal(`decode/${first.d.name}`)}, 'log', to_json(data)::VARCHAR, ${reason},
       to_json({address: address, "timestamp": "timestamp", transaction_hash: transaction_hash, transaction_index: transaction_index, log_index: log_index,
                topic_0: topic_0, topic_1: topic_1, topic_2: topic_2, topic_3: topic_3, data: data}) FROM ${from}`;
  }
}

/** The logs of one topic_0 and the members that may take them: their contract filters and the shapes skipped. */
interface TopicGroup {
  members: Member[];
  filters: string[];
  shapes: OtherShape[];
  /** SQL of the group's logs (those some member's contract filter passes). */
  candidates: string;
}

/** Decodes `logs` into one temp table per dataset and a rejects table. */
export async function decodeLogs(input: DecodeInput): Promise<DecodeOutput> {
  const { conn } = input;
  await mkdir(input.workDir, { recursive: true });
  const named = distinctDatasets(input.datasets);
  const tables = await createOutputTables(conn, named, input.prefix, input.temporary);
  const { groups, anonymous } = membersOf(named, tables);
  const topic0s = [...groups.keys()];
  await createLogsView(conn, input.logs, topic0s, anonymous);
  const run = new DecodeRun(input);
  for (const [topic0, members] of groups) await decodeGroup(run, topic0, members);
  if (anonymous.length) await decodeAnonymous(run, anonymous, topic0s);
  for (const d of named) await finishBig(conn, tables.get(d.name)!, markedColumns(d));
  const out = await outputOf(run, named, tables);
  await conn.run(`DROP TABLE IF EXISTS ${CAND}; DROP VIEW IF EXISTS ${LOGS}`);
  return out;
}

/** Every source of `named` as a member writing to its dataset's table: by topic_0, and the anonymous ones. */
function membersOf(named: readonly DecodedDataset[], tables: Map<string, string>): { groups: Map<string, Member[]>; anonymous: Member[] } {
  const groups = new Map<string, Member[]>();
  const anonymous: Member[] = [];
  for (const d of named) {
    const table = tables.get(d.name)!;
    for (const s of d.sources) {
      if (s.topic0 === null) anonymous.push({ d, s, table });
      else groups.set(s.topic0, [...(groups.get(s.topic0) ?? []), { d, s, table }]);
    }
  }
  return { groups, anonymous };
}

/** The view of the logs some member may take (their topic_0, or an anonymous member's contract), with their topic count. */
async function createLogsView(conn: DuckDBConnection, logs: string, topic0s: readonly string[], anonymous: readonly Member[]): Promise<void> {
  const anonContracts = [...new Set(anonymous.flatMap((m) => m.d.contracts ?? []))];
  const where = [
    topic0s.length ? `topic_0 IN (${topic0s.map(literal).join(', ')})` : 'false',
    anonContracts.length ? `address IN (${anonContracts.map(literal).join(', ')})` : 'false',
  ];
  await conn.run(
    // A view, not a table: each topic_0 group reads only its own logs (and columns) from the files, which cost
    // less than copying every log into memory first.
    `CREATE OR REPLACE TEMP VIEW ${LOGS} AS SELECT address, "timestamp", transaction_hash, transaction_index, log_index, topic_0, topic_1, topic_2, topic_3, data,
       (topic_0 IS NOT NULL)::INTEGER + (topic_1 IS NOT NULL)::INTEGER + (topic_2 IS NOT NULL)::INTEGER + (topic_3 IS NOT NULL)::INTEGER AS __topics
     FROM (${logs}) WHERE ${where.join(' OR ')}`,
  );
}

/** Decodes the logs of one topic_0: in SQL where DuckDB can decode every member's source, else in JavaScript. */
async function decodeGroup(run: DecodeRun, topic0: string, members: Member[]): Promise<void> {
  const filters = members.map((m) => filterSql(m.d));
  const group: TopicGroup = {
    members,
    filters,
    shapes: otherShapes(topic0, members),
    candidates: `SELECT * FROM ${LOGS} WHERE topic_0 = ${literal(topic0)} AND (${filters.map((f) => `(${f})`).join(' OR ')})`,
  };
  if (members.length === 1 && sqlDecodable(members[0]!.s)) await decodeOneSource(run, group);
  else if (members.every((m) => sqlDecodable(m.s))) await decodeSourcesInSql(run, group);
  else {
    await run.conn.run(`CREATE OR REPLACE TEMP TABLE ${CAND} AS ${group.candidates}`);
    await decodeInJs(run, members, filters, group.shapes);
    // Joined back by row number: in no particular order.
    for (const m of members) run.filled(m.table, 2);
  }
}

/** The SQL items of a member's decoded row: the log's and run's columns, the decoded ones, a batch position. */
const rowItems = (run: DecodeRun, m: Member): string[] => [...run.commonItems(m), ...decodeItems(m.s), ...(m.d.exploded ? ['0 AS batch_position'] : [])];

/**
 * One source: its reason alone decides, so the logs are read twice (the fitting ones decoded, the others rejected)
 * rather than copied once with their verdicts, which cost more than a second read.
 */
async function decodeOneSource(run: DecodeRun, g: TopicGroup): Promise<void> {
  const { conn } = run;
  const m = g.members[0]!;
  const why = `SELECT *, ${reasonSql(m.s, signatureText(m.s.event))} AS __why0 FROM (${g.candidates})`;
  const prelude = decodePrelude(m.s);
  const inserted = await conn.runAndReadAll(
    `INSERT INTO ${m.table} BY NAME SELECT ${rowItems(run, m).join(', ')} FROM (SELECT *${prelude.map((x) => `, ${x}`).join('')} FROM (${why}) WHERE __why0 IS NULL)`,
  );
  run.filled(m.table);
  // Counting the candidates reads two narrow columns; the rejects' query reads every column of the logs.
  const all = await conn.runAndReadAll(`SELECT count(*)::BIGINT FROM (${g.candidates})`);
  if (Number(inserted.getRowsJS()[0]![0]) === Number(all.getRowsJS()[0]![0])) return;
  if (g.shapes.length === 0) {
    await conn.run(run.rejectInsert(m, '__why0', `(${why}) WHERE __why0 IS NOT NULL`));
    return;
  }
  const other = otherShapeSql(g.shapes, g.members, g.filters);
  let rejects = 0;
  for (const [label, n] of (await conn.runAndReadAll(`SELECT ${other}, count(*)::BIGINT FROM (${why}) WHERE __why0 IS NOT NULL GROUP BY 1`)).getRowsJS() as [
    string | null,
    bigint,
  ][]) {
    if (label === null) rejects = Number(n);
    else run.skip(label, Number(n));
  }
  if (rejects > 0) await conn.run(run.rejectInsert(m, '__why0', `(${why}) WHERE __why0 IS NOT NULL AND (${other}) IS NULL`));
}

/**
 * Several sources, each decodable in SQL: each member's reason once (NULL: the log fits); `__ok` from it (a log
 * outside a member's contracts is not its). One statement: the candidates are materialised once, with their verdicts.
 */
async function decodeSourcesInSql(run: DecodeRun, g: TopicGroup): Promise<void> {
  const { conn } = run;
  const { members, filters } = g;
  const why = members.map((m, i) => `CASE WHEN ${filters[i]} THEN ${reasonSql(m.s, signatureText(m.s.event))} ELSE 'not its contract' END AS __w${i}`);
  const verdicts = members.map((_, i) => `__w${i} IS NULL AS __ok${i}, CASE WHEN __w${i} <> 'not its contract' THEN __w${i} END AS __why${i}`);
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE ${CAND} AS SELECT * EXCLUDE (${members.map((_, i) => `__w${i}`).join(', ')}), ${verdicts.join(', ')} FROM (SELECT *, ${why.join(', ')} FROM (${g.candidates}))`,
  );
  for (let i = 0; i < members.length; i++) {
    const m = members[i]!;
    const earlier = members
      .slice(0, i)
      .map((_, j) => ` AND NOT __ok${j}`)
      .join('');
    const prelude = decodePrelude(m.s);
    const from = `(SELECT *${prelude.map((x) => `, ${x}`).join('')} FROM ${CAND} WHERE __ok${i}${earlier})`;
    await conn.run(`INSERT INTO ${m.table} BY NAME SELECT ${rowItems(run, m).join(', ')} FROM ${from}`);
    run.filled(m.table);
  }
  let none = members.map((_, i) => `NOT __ok${i}`).join(' AND ');
  if (g.shapes.length) {
    const other = otherShapeSql(g.shapes, members, filters);
    const counted = (await conn.runAndReadAll(`SELECT ${other} AS s, count(*)::BIGINT FROM ${CAND} WHERE ${none} GROUP BY 1 HAVING s IS NOT NULL`)).getRowsJS();
    for (const [label, n] of counted as [string, bigint][]) run.skip(label, Number(n));
    none += ` AND (${other}) IS NULL`;
  }
  await conn.run(run.rejectInsert(members[0]!, `concat_ws('; ', ${members.map((_, i) => `__why${i}`).join(', ')})`, `${CAND} WHERE ${none}`));
}

/** Anonymous events: the contract's logs whose topic_0 is no known event's signature, decoded in JavaScript. */
async function decodeAnonymous(run: DecodeRun, anonymous: Member[], topic0s: readonly string[]): Promise<void> {
  const known = topic0s.length ? ` AND topic_0 NOT IN (${topic0s.map(literal).join(', ')})` : '';
  const filters = anonymous.map((m) => filterSql(m.d));
  await run.conn.run(
    `CREATE OR REPLACE TEMP TABLE ${CAND} AS SELECT * FROM ${LOGS} WHERE (${filters.map((f) => `(${f})`).join(' OR ')})${known.replace(/topic_0 NOT IN/, '(topic_0 IS NULL OR topic_0 NOT IN') + (known ? ')' : '')}`,
  );
  await decodeInJs(run, anonymous, filters, []);
  for (const m of anonymous) run.filled(m.table, 2);
}

/** Only SQL-decoded wide integers are marked: their _raw companions and exact-text ids. */
const markedColumns = (d: DecodedDataset): string[] => [
  ...new Set(
    d.sources
      .filter(sqlDecodable)
      .flatMap((s) =>
        s.event.inputs.flatMap((p, i) =>
          /^uint/.test(p.type) && isWideUint(p.type) ? [s.targets[i]!.text ? s.targets[i]!.column : `${s.targets[i]!.column}_raw`] : [],
        ),
      ),
  ),
];

/** What the decoding wrote: its tables and their rows, the rejects, the logs read and skipped, the tables in log order. */
async function outputOf(run: DecodeRun, named: readonly DecodedDataset[], tables: Map<string, string>): Promise<DecodeOutput> {
  const count = async (sql: string): Promise<number> => Number((await run.conn.runAndReadAll(sql)).getRowsJS()[0]![0]);
  const rows = new Map<string, number>();
  for (const d of named) rows.set(d.name, await count(`SELECT count(*)::BIGINT FROM ${tables.get(d.name)!}`));
  return {
    tables,
    rows,
    rejects: REJ,
    rejectCount: await count(`SELECT count(*)::BIGINT FROM ${REJ}`),
    logs: await count(`SELECT count(*)::BIGINT FROM ${LOGS}`),
    skipped: run.skipped,
    ordered: new Set(named.filter((d) => (run.fills.get(tables.get(d.name)!) ?? 0) <= 1).map((d) => d.name)),
  };
}

/** Distinct datasets by name (a spec may name one twice). */
export const distinctDatasets = (datasets: readonly DecodedDataset[]): DecodedDataset[] =>
  datasets.filter((d, i) => datasets.findIndex((x) => x.name === d.name) === i);

/**
 * The empty output tables of `datasets` (distinct by name), by dataset name, and the temp rejects table
 * (DecodeOutput.rejects) on `conn`.
 */
export async function createOutputTables(
  conn: DuckDBConnection,
  datasets: readonly DecodedDataset[],
  prefix = '__decode_out_',
  temporary = false,
): Promise<Map<string, string>> {
  const tables = new Map<string, string>();
  for (const [i, d] of distinctDatasets(datasets).entries()) {
    const table = `${prefix}${i}`;
    tables.set(d.name, table);
    const cols = allColumns(d).map((c) => `${ident(c.name)} ${c.type}`);
    // Plain tables of the engine's in-memory database by default, not TEMP ones: the lake writer's other
    // connections read them to write partitions side by side (decode/lake.ts).
    await conn.run(`CREATE OR REPLACE ${temporary ? 'TEMP ' : ''}TABLE ${table} (${cols.join(', ')}, __partition VARCHAR)`);
  }
  await conn.run(`CREATE OR REPLACE TEMP TABLE ${REJ} (dataset VARCHAR, "window" VARCHAR, field VARCHAR, raw_value VARCHAR, reason VARCHAR, entry JSON)`);
  return tables;
}

/** The staged JSON files of one JavaScript decoding: one per member, one of rejects. */
interface Staged {
  files: string[];
  rejFile: string;
}

/** Decodes the candidate table's logs in JavaScript, in chunks, through staged JSON files. */
async function decodeInJs(run: DecodeRun, members: Member[], filters: string[], shapes: readonly OtherShape[]): Promise<void> {
  const { conn, workDir } = run.input;
  const tag = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const staged: Staged = {
    files: members.map((_, i) => path.join(workDir, `decoded-${tag}-${i}.ndjson`)),
    rejFile: path.join(workDir, `rejects-${tag}.ndjson`),
  };
  // Which members each log may be (their contract filters), computed in SQL once.
  const n = Number((await conn.runAndReadAll(`SELECT count(*)::BIGINT FROM ${CAND}`)).getRowsJS()[0]![0]);
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE ${CAND} AS SELECT *, row_number() OVER () - 1 AS __row, [${filters.map((f) => `(${f})`).join(', ')}] AS __may FROM ${CAND}`,
  );
  const { counts, rejects } = await stageDecoded(run, members, shapes, n, staged);
  for (let i = 0; i < members.length; i++) if (counts[i] !== 0) await insertStaged(run, members[i]!, staged.files[i]!);
  if (rejects > 0) {
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE __decode_js_rejects AS SELECT c.*, j.reason AS __reason FROM read_json(${literal(staged.rejFile)}, format = 'newline_delimited', columns = {'__row': 'BIGINT', 'reason': 'VARCHAR'}) j JOIN ${CAND} c ON c.__row = j.__row`,
    );
    await conn.run(run.rejectInsert(members[0]!, '__reason', '__decode_js_rejects'));
    await conn.run('DROP TABLE __decode_js_rejects');
  }
}

type CandidateRow = [bigint, string | null, string | null, string | null, string | null, string | null, boolean[]];

/**
 * Decodes the `n` candidates chunk by chunk into the staged files (each row with its candidate's `__row`); returns the
 * rows staged per member and the rejects staged.
 */
async function stageDecoded(
  run: DecodeRun,
  members: Member[],
  shapes: readonly OtherShape[],
  n: number,
  staged: Staged,
): Promise<{ counts: number[]; rejects: number }> {
  const streams = staged.files.map((f) => createWriteStream(f));
  const rejStream = createWriteStream(staged.rejFile);
  const write = async (s: NodeJS.WritableStream, line: string): Promise<void> => {
    if (!s.write(line)) await once(s, 'drain');
  };
  const counts = members.map(() => 0);
  let rejects = 0;
  for (let lo = 0; lo < n; lo += JS_CHUNK) {
    const rows = (
      await run.conn.runAndReadAll(
        `SELECT __row, topic_0, topic_1, topic_2, topic_3, data, __may FROM ${CAND} WHERE __row >= ${lo} AND __row < ${lo + JS_CHUNK}`,
      )
    ).getRowsJS() as CandidateRow[];
    for (const [row, t0, t1, t2, t3, data, may] of rows) {
      const got = decodeCandidate(members, may, [t0, t1, t2, t3], data);
      if ('member' in got) {
        counts[got.member]! += got.rows.length;
        for (const r of got.rows) await write(streams[got.member]!, JSON.stringify({ ...r, __row: Number(row) }) + '\n');
        continue;
      }
      const other = otherShapeOf(members, shapes, may, [t0, t1, t2, t3], data);
      if (other) {
        run.skip(other.label, 1);
        continue;
      }
      rejects++;
      await write(rejStream, JSON.stringify({ __row: Number(row), reason: got.reasons.join('; ') }) + '\n');
    }
  }
  await Promise.all([...streams, rejStream].map((s) => new Promise<void>((resolve, reject) => s.end((e?: Error | null) => (e ? reject(e) : resolve())))));
  return { counts, rejects };
}

/** The first member (of those the log `may` be) whose source fits the log, and its rows; else every member's reason. */
function decodeCandidate(
  members: readonly Member[],
  may: readonly boolean[],
  topics: (string | null)[],
  data: string | null,
): { member: number; rows: Record<string, unknown>[] } | { reasons: string[] } {
  const reasons: string[] = [];
  for (let i = 0; i < members.length; i++) {
    if (!may[i]) continue;
    const got = decodeLog(members[i]!.s, topics, data);
    if ('reason' in got) reasons.push(got.reason);
    else return { member: i, rows: got.rows };
  }
  return { reasons };
}

/** As otherShapeSql: the other standard's shape of a log no member took, unless a non-standard member may take it. */
function otherShapeOf(
  members: readonly Member[],
  shapes: readonly OtherShape[],
  may: readonly boolean[],
  topics: readonly (string | null)[],
  data: string | null,
): OtherShape | undefined {
  if (!shapes.length || members.some((m, i) => may[i] && !STANDARD[m.d.name])) return undefined;
  const count = topics.filter((t) => t !== null).length;
  return shapes.find((x) => x.topics === count && (data ?? '0x').length === 2 + 64 * x.dataWords);
}

/** Inserts a member's staged rows into its table, joined back to their logs by row number. */
async function insertStaged(run: DecodeRun, m: Member, file: string): Promise<void> {
  const spec = stagedSpec(m.s);
  const types = finalTypes(m.s);
  const columns = `{${Object.entries(spec)
    .map(([k, t]) => `${literal(k)}: ${literal(t)}`)
    .join(', ')}}`;
  const items = [
    ...run.commonItems(m, 'c.'),
    ...Object.entries(types).map(([k, t]) => `CAST(j.${ident(k)} AS ${t}) AS ${ident(k)}`),
    ...(m.d.exploded ? ['j.__pos AS batch_position'] : []),
  ];
  await run.conn.run(
    `INSERT INTO ${m.table} BY NAME SELECT ${items.join(', ')} FROM read_json(${literal(file)}, format = 'newline_delimited', columns = ${columns}) j JOIN ${CAND} c ON c.__row = j.__row`,
  );
}

/** Replaces the 256-bit words DuckDB marked (BIG_MARK) with their exact decimal text. */
async function finishBig(conn: DuckDBConnection, table: string, columns: string[]): Promise<void> {
  for (const c of columns) {
    const col = ident(c);
    const marked = (await conn.runAndReadAll(`SELECT DISTINCT ${col} FROM ${table} WHERE starts_with(${col}, ${literal(BIG_MARK)})`)).getRowsJS() as [string][];
    if (marked.length === 0) continue;
    const pairs = marked.map(([m]) => [m, BigInt('0x' + m.slice(BIG_MARK.length)).toString()] as const);
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE __decode_big AS SELECT unnest(${literalList(pairs.map((p) => p[0]))}) AS k, unnest(${literalList(pairs.map((p) => p[1]))}) AS v`,
    );
    await conn.run(`UPDATE ${table} SET ${col} = b.v FROM __decode_big b WHERE ${table}.${col} = b.k`);
    await conn.run('DROP TABLE __decode_big');
  }
}
