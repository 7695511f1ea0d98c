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

/** Decodes `logs` into one temp table per dataset and a rejects table. */
export async function decodeLogs(input: DecodeInput): Promise<DecodeOutput> {
  const { conn, datasets, runId, ingestedAt } = input;
  await mkdir(input.workDir, { recursive: true });
  const named = distinctDatasets(datasets);
  const groups = new Map<string, Member[]>();
  const anonymous: Member[] = [];
  const tables = await createOutputTables(conn, named, input.prefix);
  for (const d of named) {
    const table = tables.get(d.name)!;
    for (const s of d.sources) {
      if (s.topic0 === null) anonymous.push({ d, s, table });
      else groups.set(s.topic0, [...(groups.get(s.topic0) ?? []), { d, s, table }]);
    }
  }
  // Statements that filled each table: rows of one SQL statement over the logs keep the logs' order.
  const fills = new Map<string, number>();
  const filled = (table: string, n = 1): void => void fills.set(table, (fills.get(table) ?? 0) + n);
  const topic0s = [...groups.keys()];
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
     FROM (${input.logs}) WHERE ${where.join(' OR ')}`,
  );

  const commonItems = (m: Member, p = ''): string[] => [
    `${p}address AS ${ident(m.d.contractColumn)}`,
    `${p}"timestamp" AS "timestamp"`,
    `${p}transaction_hash AS transaction_hash`,
    `${p}transaction_index AS transaction_index`,
    `${p}log_index AS log_index`,
    ...(m.d.sources.length > 1 ? [`${literal(m.s.label)} AS "event"`] : []),
    `${literal(runId)} AS _run_id`,
    `CAST(${literal(ingestedAt)} AS TIMESTAMPTZ) AS _ingested_at`,
    `strftime(${p}"timestamp", '%Y-%m-%d') AS __partition`,
  ];
  const rejectInsert = (first: Member, reason: string, from: string): string =>
    `INSERT INTO ${REJ} SELECT ${literal(first.d.name)}, ${literal(`decode/${first.d.name}`)}, 'log', to_json(data)::VARCHAR, ${reason},
       to_json({address: address, "timestamp": "timestamp", transaction_hash: transaction_hash, transaction_index: transaction_index, log_index: log_index,
                topic_0: topic_0, topic_1: topic_1, topic_2: topic_2, topic_3: topic_3, data: data}) FROM ${from}`;

  const skipped = new Map<string, number>();
  const skip = (label: string, n: number): void => void skipped.set(label, (skipped.get(label) ?? 0) + n);
  for (const [topic0, members] of groups) {
    const filters = members.map((m) => filterSql(m.d));
    const shapes = otherShapes(topic0, members);
    const candidates = `SELECT * FROM ${LOGS} WHERE topic_0 = ${literal(topic0)} AND (${filters.map((f) => `(${f})`).join(' OR ')})`;
    if (members.length === 1 && sqlDecodable(members[0]!.s)) {
      // One source: its reason alone decides, so the logs are read twice (the fitting ones decoded, the others
      // rejected) rather than copied once with their verdicts, which cost more than a second read.
      const m = members[0]!;
      const why = `SELECT *, ${reasonSql(m.s, signatureText(m.s.event))} AS __why0 FROM (${candidates})`;
      const items = [...commonItems(m), ...decodeItems(m.s), ...(m.d.exploded ? ['0 AS batch_position'] : [])];
      const prelude = decodePrelude(m.s);
      const inserted = await conn.runAndReadAll(
        `INSERT INTO ${m.table} BY NAME SELECT ${items.join(', ')} FROM (SELECT *${prelude.map((x) => `, ${x}`).join('')} FROM (${why}) WHERE __why0 IS NULL)`,
      );
      filled(m.table);
      // Counting the candidates reads two narrow columns; the rejects' query reads every column of the logs.
      const all = await conn.runAndReadAll(`SELECT count(*)::BIGINT FROM (${candidates})`);
      if (Number(inserted.getRowsJS()[0]![0]) !== Number(all.getRowsJS()[0]![0])) {
        if (shapes.length === 0) await conn.run(rejectInsert(m, '__why0', `(${why}) WHERE __why0 IS NOT NULL`));
        else {
          const other = otherShapeSql(shapes, members, filters);
          let rejects = 0;
          for (const [label, n] of (
            await conn.runAndReadAll(`SELECT ${other}, count(*)::BIGINT FROM (${why}) WHERE __why0 IS NOT NULL GROUP BY 1`)
          ).getRowsJS() as [string | null, bigint][]) {
            if (label === null) rejects = Number(n);
            else skip(label, Number(n));
          }
          if (rejects > 0) await conn.run(rejectInsert(m, '__why0', `(${why}) WHERE __why0 IS NOT NULL AND (${other}) IS NULL`));
        }
      }
    } else if (members.every((m) => sqlDecodable(m.s))) {
      // Each member's reason once (NULL: the log fits); `__ok` from it (a log outside a member's contracts is
      // not its). One statement: the candidates are materialised once, with their verdicts.
      const why = members.map((m, i) => `CASE WHEN ${filters[i]} THEN ${reasonSql(m.s, signatureText(m.s.event))} ELSE 'not its contract' END AS __w${i}`);
      const verdicts = members.map((_, i) => `__w${i} IS NULL AS __ok${i}, CASE WHEN __w${i} <> 'not its contract' THEN __w${i} END AS __why${i}`);
      await conn.run(
        `CREATE OR REPLACE TEMP TABLE ${CAND} AS SELECT * EXCLUDE (${members.map((_, i) => `__w${i}`).join(', ')}), ${verdicts.join(', ')} FROM (SELECT *, ${why.join(', ')} FROM (${candidates}))`,
      );
      for (let i = 0; i < members.length; i++) {
        const m = members[i]!;
        const earlier = members
          .slice(0, i)
          .map((_, j) => ` AND NOT __ok${j}`)
          .join('');
        const items = [...commonItems(m), ...decodeItems(m.s), ...(m.d.exploded ? ['0 AS batch_position'] : [])];
        const prelude = decodePrelude(m.s);
        const from = `(SELECT *${prelude.map((x) => `, ${x}`).join('')} FROM ${CAND} WHERE __ok${i}${earlier})`;
        await conn.run(`INSERT INTO ${m.table} BY NAME SELECT ${items.join(', ')} FROM ${from}`);
        filled(m.table);
      }
      let none = members.map((_, i) => `NOT __ok${i}`).join(' AND ');
      if (shapes.length) {
        const other = otherShapeSql(shapes, members, filters);
        const counted = (
          await conn.runAndReadAll(`SELECT ${other} AS s, count(*)::BIGINT FROM ${CAND} WHERE ${none} GROUP BY 1 HAVING s IS NOT NULL`)
        ).getRowsJS();
        for (const [label, n] of counted as [string, bigint][]) skip(label, Number(n));
        none += ` AND (${other}) IS NULL`;
      }
      await conn.run(rejectInsert(members[0]!, `concat_ws('; ', ${members.map((_, i) => `__why${i}`).join(', ')})`, `${CAND} WHERE ${none}`));
    } else {
      await conn.run(`CREATE OR REPLACE TEMP TABLE ${CAND} AS ${candidates}`);
      await decodeInJs(input, members, filters, commonItems, rejectInsert, shapes, skip);
      // Joined back by row number: in no particular order.
      for (const m of members) filled(m.table, 2);
    }
  }
  if (anonymous.length) {
    // Anonymous events: the contract's logs whose topic_0 is no known event's signature.
    const known = topic0s.length ? ` AND topic_0 NOT IN (${topic0s.map(literal).join(', ')})` : '';
    const filters = anonymous.map((m) => filterSql(m.d));
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE ${CAND} AS SELECT * FROM ${LOGS} WHERE (${filters.map((f) => `(${f})`).join(' OR ')})${known.replace(/topic_0 NOT IN/, '(topic_0 IS NULL OR topic_0 NOT IN') + (known ? ')' : '')}`,
    );
    await decodeInJs(input, anonymous, filters, commonItems, rejectInsert, [], skip);
    for (const m of anonymous) filled(m.table, 2);
  }
  // Only SQL-decoded wide integers are marked: their _raw companions and exact-text ids.
  const marked = (d: DecodedDataset): string[] =>
    d.sources
      .filter(sqlDecodable)
      .flatMap((s) =>
        s.event.inputs.flatMap((p, i) =>
          /^uint/.test(p.type) && isWideUint(p.type) ? [s.targets[i]!.text ? s.targets[i]!.column : `${s.targets[i]!.column}_raw`] : [],
        ),
      );
  for (const d of named) await finishBig(conn, tables.get(d.name)!, [...new Set(marked(d))]);
  const count = async (sql: string): Promise<number> => Number((await conn.runAndReadAll(sql)).getRowsJS()[0]![0]);
  const rows = new Map<string, number>();
  for (const d of named) rows.set(d.name, await count(`SELECT count(*)::BIGINT FROM ${tables.get(d.name)!}`));
  const out = {
    tables,
    rows,
    rejects: REJ,
    rejectCount: await count(`SELECT count(*)::BIGINT FROM ${REJ}`),
    logs: await count(`SELECT count(*)::BIGINT FROM ${LOGS}`),
    skipped,
    ordered: new Set(named.filter((d) => (fills.get(tables.get(d.name)!) ?? 0) <= 1).map((d) => d.name)),
  };
  await conn.run(`DROP TABLE IF EXISTS ${CAND}; DROP VIEW IF EXISTS ${LOGS}`);
  return out;
}

/** Distinct datasets by name (a spec may name one twice). */
export const distinctDatasets = (datasets: readonly DecodedDataset[]): DecodedDataset[] =>
  datasets.filter((d, i) => datasets.findIndex((x) => x.name === d.name) === i);

/**
 * The empty output tables of `datasets` (distinct by name), by dataset name, and the temp rejects table
 * (DecodeOutput.rejects) on `conn`.
 */
export async function createOutputTables(conn: DuckDBConnection, datasets: readonly DecodedDataset[], prefix = '__decode_out_'): Promise<Map<string, string>> {
  const tables = new Map<string, string>();
  for (const [i, d] of distinctDatasets(datasets).entries()) {
    const table = `${prefix}${i}`;
    tables.set(d.name, table);
    const cols = allColumns(d).map((c) => `${ident(c.name)} ${c.type}`);
    // Plain tables of the engine's in-memory database, not TEMP ones: the lake writer's other connections
    // read them to write partitions side by side (decode/lake.ts).
    await conn.run(`CREATE OR REPLACE TABLE ${table} (${cols.join(', ')}, __partition VARCHAR)`);
  }
  await conn.run(`CREATE OR REPLACE TEMP TABLE ${REJ} (dataset VARCHAR, "window" VARCHAR, field VARCHAR, raw_value VARCHAR, reason VARCHAR, entry JSON)`);
  return tables;
}

/** Decodes the candidate table's logs in JavaScript, in chunks, through staged JSON files. */
async function decodeInJs(
  input: DecodeInput,
  members: Member[],
  filters: string[],
  commonItems: (m: Member, prefix?: string) => string[],
  rejectInsert: (first: Member, reason: string, from: string) => string,
  shapes: readonly OtherShape[],
  skip: (label: string, n: number) => void,
): Promise<void> {
  const { conn, workDir } = input;
  const tag = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const files = members.map((_, i) => path.join(workDir, `decoded-${tag}-${i}.ndjson`));
  const rejFile = path.join(workDir, `rejects-${tag}.ndjson`);
  const streams = files.map((f) => createWriteStream(f));
  const rejStream = createWriteStream(rejFile);
  const write = async (s: NodeJS.WritableStream, line: string): Promise<void> => {
    if (!s.write(line)) await once(s, 'drain');
  };
  // Which members each log may be (their contract filters), computed in SQL once.
  const n = Number((await conn.runAndReadAll(`SELECT count(*)::BIGINT FROM ${CAND}`)).getRowsJS()[0]![0]);
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE ${CAND} AS SELECT *, row_number() OVER () - 1 AS __row, [${filters.map((f) => `(${f})`).join(', ')}] AS __may FROM ${CAND}`,
  );
  let counts = members.map(() => 0);
  let rejects = 0;
  for (let lo = 0; lo < n; lo += JS_CHUNK) {
    const rows = (
      await conn.runAndReadAll(`SELECT __row, topic_0, topic_1, topic_2, topic_3, data, __may FROM ${CAND} WHERE __row >= ${lo} AND __row < ${lo + JS_CHUNK}`)
    ).getRowsJS() as [bigint, string | null, string | null, string | null, string | null, string | null, boolean[]][];
    for (const [row, t0, t1, t2, t3, data, may] of rows) {
      const reasons: string[] = [];
      let taken = false;
      for (let i = 0; i < members.length && !taken; i++) {
        if (!may[i]) continue;
        const m = members[i]!;
        const got = decodeLog(m.s, [t0, t1, t2, t3], data);
        if ('reason' in got) {
          reasons.push(got.reason);
          continue;
        }
        taken = true;
        counts[i]! += got.rows.length;
        for (const r of got.rows) await write(streams[i]!, JSON.stringify({ ...r, __row: Number(row) }) + '\n');
      }
      if (!taken) {
        // As otherShapeSql: another standard's shape, unless a non-standard member may take the log.
        const topics = [t0, t1, t2, t3].filter((t) => t !== null).length;
        const other =
          shapes.length && !members.some((m, i) => may[i] && !STANDARD[m.d.name])
            ? shapes.find((x) => x.topics === topics && (data ?? '0x').length === 2 + 64 * x.dataWords)
            : undefined;
        if (other) {
          skip(other.label, 1);
          continue;
        }
        rejects++;
        await write(rejStream, JSON.stringify({ __row: Number(row), reason: reasons.join('; ') }) + '\n');
      }
    }
  }
  await Promise.all([...streams, rejStream].map((s) => new Promise<void>((resolve, reject) => s.end((e?: Error | null) => (e ? reject(e) : resolve())))));
  for (let i = 0; i < members.length; i++) {
    if (counts[i] === 0) continue;
    const m = members[i]!;
    const spec = stagedSpec(m.s);
    const types = finalTypes(m.s);
    const columns = `{${Object.entries(spec)
      .map(([k, t]) => `${literal(k)}: ${literal(t)}`)
      .join(', ')}}`;
    const items = [
      ...commonItems(m, 'c.'),
      ...Object.entries(types).map(([k, t]) => `CAST(j.${ident(k)} AS ${t}) AS ${ident(k)}`),
      ...(m.d.exploded ? ['j.__pos AS batch_position'] : []),
    ];
    await conn.run(
      `INSERT INTO ${m.table} BY NAME SELECT ${items.join(', ')} FROM read_json(${literal(files[i]!)}, format = 'newline_delimited', columns = ${columns}) j JOIN ${CAND} c ON c.__row = j.__row`,
    );
  }
  counts = [];
  if (rejects > 0) {
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE __decode_js_rejects AS SELECT c.*, j.reason AS __reason FROM read_json(${literal(rejFile)}, format = 'newline_delimited', columns = {'__row': 'BIGINT', 'reason': 'VARCHAR'}) j JOIN ${CAND} c ON c.__row = j.__row`,
    );
    await conn.run(rejectInsert(members[0]!, '__reason', '__decode_js_rejects'));
    await conn.run('DROP TABLE __decode_js_rejects');
  }
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
