// A decoding's rejects replace those an earlier decoding wrote for the same logs. A decode reject is one log
// that fit no asked event of a dataset: its identity is that dataset and the log (transaction_hash,
// log_index), not the run that saw it, so decoding a log again replaces its reject (or drops it, when the log
// now decodes or is skipped) instead of adding one per run. `_rejects` is partitioned by the date of the run
// that wrote a row, so the rows replaced may sit in any day: each such day is rewritten without them
// (load/write/commit.ts prepareRejects, for `chainlake decode` and for the decoding inside a run's commit alike).

import type { DuckDBConnection } from '@duckdb/node-api';
import type { Network } from '../datasets/dataset.js';
import { partitionKey, type LakeState } from '../load/write/lake-state.js';
import { REJECTS_SHAPE } from '../load/schema.js';
import { literal, literalList } from '../load/sql.js';
import type { DecodedDataset } from './datasets.js';
import { distinctDatasets, filterSql } from './decode.js';

/** The keys (`dataset/transaction_hash/log_index`) of the rejects a decoding replaces. */
const REPLACED = '__decode_replaced';

/** A decode reject's key, over `_rejects` columns (decode.ts writes the log as `entry`). */
const KEY = `dataset || '/' || (entry->>'transaction_hash') || '/' || (entry->>'log_index')`;

/** The condition a `_rejects` row meets unless it is a decode reject the decoding replaces (see findReplacedRejects). */
export const KEEP_REJECT = `NOT (starts_with("window", 'decode/') AND coalesce(${KEY} IN (SELECT k FROM ${REPLACED}), false))`;

/** Whether a log (its `topic_0` and `address`) is one the dataset decodes: the candidates of decode.ts. */
function candidateSql(d: DecodedDataset): string {
  const topics = d.sources.flatMap((s) => (s.topic0 === null ? [] : [s.topic0]));
  // An anonymous event's candidates are its contract's logs of any topic_0.
  const topic = d.sources.some((s) => s.topic0 === null) ? 'true' : `topic_0 IN (${topics.map(literal).join(', ')})`;
  return `(${topic}) AND (${filterSql(d)})`;
}

/** The `_rejects` files of one network (present on this machine), and the partition (run date) each belongs to. */
async function lakeRejectFiles(lake: LakeState, network: Network): Promise<{ files: readonly string[]; partitionOf(file: string): string | undefined }> {
  const prefix = partitionKey(network, '');
  const day = new Map<string, string>();
  for (const [key, fs] of lake.table(REJECTS_SHAPE.name).partitions) if (key.startsWith(prefix)) for (const f of fs) day.set(f.path, key.slice(prefix.length));
  return { files: await lake.localFiles(REJECTS_SHAPE.name, network), partitionOf: (file) => day.get(file) };
}

/**
 * Finds the lake's decode rejects (of `network`) that decoding `logs` (a relation of event_logs rows) into
 * `datasets` replaces: those of one of the datasets whose log is among `logs` and is that dataset's candidate.
 * Their keys go to a table of the engine that KEEP_REJECT reads (any of its connections: the distributed
 * committer merges `_rejects` on its own); returns the `_rejects` partitions holding them.
 */
export async function findReplacedRejects(
  conn: DuckDBConnection,
  lake: LakeState,
  network: Network,
  datasets: readonly DecodedDataset[],
  logs: string,
): Promise<string[]> {
  const rejects = await lakeRejectFiles(lake, network);
  await conn.run(`CREATE OR REPLACE TABLE ${REPLACED} (k VARCHAR, filename VARCHAR)`);
  const files = [...rejects.files];
  const named = distinctDatasets(datasets);
  if (files.length === 0 || named.length === 0) return [];
  const candidate = `CASE dataset ${named.map((d) => `WHEN ${literal(d.name)} THEN ${candidateSql(d)}`).join(' ')} END`;
  // The rejects first (few, from small files), and only when there are some the logs' keys.
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE ${REPLACED}_of AS SELECT k, filename, tx, li FROM (
       SELECT ${KEY} AS k, filename, dataset, entry->>'transaction_hash' AS tx, (entry->>'log_index')::BIGINT AS li, entry->>'topic_0' AS topic_0, entry->>'address' AS address
       FROM read_parquet(${literalList(files)}, hive_partitioning = false, union_by_name = true, filename = true)
       WHERE starts_with("window", 'decode/') AND dataset IN (${named.map((d) => literal(d.name)).join(', ')})
     ) WHERE ${candidate}`,
  );
  if (Number((await conn.runAndReadAll(`SELECT count(*)::BIGINT FROM ${REPLACED}_of`)).getRowsJS()[0]![0]) > 0) {
    await conn.run(
      `INSERT INTO ${REPLACED} SELECT DISTINCT r.k, r.filename FROM ${REPLACED}_of r SEMI JOIN (SELECT transaction_hash, log_index FROM (${logs})) l
       ON l.transaction_hash = r.tx AND l.log_index = r.li`,
    );
  }
  await conn.run(`DROP TABLE ${REPLACED}_of`);
  const held = ((await conn.runAndReadAll(`SELECT DISTINCT filename FROM ${REPLACED}`)).getRowsJS() as [string][]).map(([f]) => f);
  return [...new Set(held.flatMap((f) => rejects.partitionOf(f) ?? []))].sort();
}

/** Drops the table of findReplacedRejects. */
export const dropReplacedRejects = (conn: DuckDBConnection): Promise<void> => conn.run(`DROP TABLE IF EXISTS ${REPLACED}`).then(() => undefined);
