import type { DuckDBConnection } from '@duckdb/node-api';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { diskPartitions } from '../write/maintenance.js';
import { lakeShapes } from '../schema.js';
import type { LakePaths } from '../paths.js';
import { hasPendingCommit } from '../write/recovery.js';
import { ident } from '../sql.js';

export interface LakeStatus {
  lake: string;
  /** A killed writer's decided commit that no command could finish yet (a live run holds the lake). */
  pendingCommit: boolean;
  datasets: {
    dataset: string;
    network: string;
    partitions: number;
    files: number;
    rows: number;
    bytes: number;
    min_block: number | null;
    max_block: number | null;
  }[];
  /**
   * Files the newest snapshot lists that are not on disk (relative to the lake): deleted by something else, e.g.
   * another DuckLake writer's cleanup while chainlake's views still named them. Reading those tables fails.
   */
  missingFiles: string[];
  /**
   * Files that only snapshots older than the newest reference (replaced partitions kept for time travel): their
   * count and bytes, which `chainlake maintain` frees once it expires those snapshots.
   */
  oldSnapshots: { files: number; bytes: number };
  /** Partitions holding files on disk that no snapshot of the catalog lists (something else wrote them). */
  strayPartitions: { dataset: string; network: string; partition: string; files: number }[];
  runs: {
    run_id: string;
    job: string;
    status: string;
    started_at: string;
    finished_at: string | null;
    rows: number | null;
    rejects: number | null;
    windows_failed: number | null;
  }[];
  /** `run_id`: the run that last moved it (NULL on a distributed lake, whose control plane does not keep it). */
  watermarks: { network: string; dataset: string; scope: string; block: number; run_id: string | null; updated_at: string }[];
  /** Block ranges between committed windows of one scope that no committed window covers. */
  gaps: { network: string; dataset: string; scope: string; from_block: number; to_block: number }[];
  /**
   * Windows fetched and not committed: on one machine, kept by a run whose commit could not happen (the next run of
   * the job commits them without sending their requests again); distributed, waiting for a worker's commit.
   */
  fetchedWindows: (WindowPlace & { rows: number | null; requests: number | null })[];
  /** Failed windows whose range no committed window of the same scope covers (yet). */
  uncoveredFailures: (WindowPlace & { error: string | null })[];
}

/** A ledger window's run and place, as status lists it. */
interface WindowPlace {
  run_id: string;
  network: string;
  dataset: string;
  scope: string;
  from_block: number | null;
  to_block: number | null;
}

/** A table or view of the connection's database: a local catalog has `runs` as a table, a distributed reader as a view. */
async function relationExists(conn: DuckDBConnection, name: string): Promise<boolean> {
  const r = await conn.runAndReadAll(
    `SELECT 1 FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' AND table_name = '${name}'
     UNION ALL SELECT 1 FROM duckdb_views() WHERE database_name = current_database() AND schema_name = 'main' AND view_name = '${name}'`,
  );
  return r.getRowsJS().length > 0;
}

/** Rows as plain objects with JS numbers (bigints from DuckDB are counts and block numbers, well within 2^53). */
async function objects<T>(conn: DuckDBConnection, sql: string): Promise<T[]> {
  const rows = (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[];
  return rows.map(
    (r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'bigint' ? Number(v) : v instanceof Date ? v.toISOString() : v])) as T,
  );
}

/**
 * What a user asks before trusting a lake: what is in it, what ran, how far each scope got, and what is missing.
 * `conn` has the tables of a local lake's catalog (`files`, `runs`, `windows`, `watermarks`, `ducklake_*`): a
 * local lake's catalog itself (`lake` its paths: then also what is on its disk), or a distributed lake's reader,
 * whose views give the control plane's ledger the same columns (distributed/read.ts; `lake` then names it).
 */
export async function lakeStatus(conn: DuckDBConnection, lake: LakePaths | { name: string }, opts: { runs?: number } = {}): Promise<LakeStatus> {
  const paths = 'root' in lake ? lake : undefined;
  const catalog = await relationExists(conn, 'ducklake_data_file');
  const datasets = await datasetsOf(conn, catalog);
  return {
    lake: paths ? paths.root : (lake as { name: string }).name,
    pendingCommit: paths ? await hasPendingCommit(paths) : false,
    datasets,
    missingFiles: paths && catalog ? await missingOnDisk(conn, paths) : [],
    oldSnapshots: catalog ? await oldSnapshotsOf(conn) : { files: 0, bytes: 0 },
    strayPartitions: paths && catalog ? await strayPartitionsOf(conn, paths) : [],
    ...(await ledgerOf(conn, opts.runs ?? 10)),
  };
}

/** Per dataset and network, what the newest snapshot holds (rows as a reader of it reads them). */
async function datasetsOf(conn: DuckDBConnection, catalog: boolean): Promise<LakeStatus['datasets']> {
  if (!(await relationExists(conn, 'files'))) return [];
  const datasets = await objects<LakeStatus['datasets'][number]>(
    conn,
    `SELECT dataset, network, count(DISTINCT "partition")::BIGINT AS partitions, count(*)::BIGINT AS files, sum(rows)::BIGINT AS rows, sum(bytes)::BIGINT AS bytes,
            min(min_block)::BIGINT AS min_block, max(max_block)::BIGINT AS max_block
     FROM files GROUP BY ALL ORDER BY dataset, network`,
  );
  if (catalog) await countOthersRows(conn, datasets);
  return datasets;
}

/** Files only older snapshots list: what `maintain` would free. The same catalog tables on either kind of lake. */
async function oldSnapshotsOf(conn: DuckDBConnection): Promise<LakeStatus['oldSnapshots']> {
  const [old] = await objects<{ files: number; bytes: number | null }>(
    conn,
    `SELECT count(*)::BIGINT AS files, sum(file_size_bytes)::BIGINT AS bytes FROM (
       SELECT file_size_bytes FROM ducklake_data_file WHERE end_snapshot IS NOT NULL
       UNION ALL SELECT file_size_bytes FROM ducklake_delete_file WHERE end_snapshot IS NOT NULL)`,
  );
  return { files: old?.files ?? 0, bytes: old?.bytes ?? 0 };
}

/** Files the newest snapshot names that are not on the local lake's disk (another writer's cleanup, a lost file). */
async function missingOnDisk(conn: DuckDBConnection, paths: LakePaths): Promise<string[]> {
  const current = (
    (
      await conn.runAndReadAll(
        `SELECT CASE WHEN f.path_is_relative THEN sc.path || t.path || f.path ELSE f.path END FROM (
           SELECT table_id, path, path_is_relative FROM ducklake_data_file WHERE end_snapshot IS NULL
           UNION ALL SELECT table_id, path, path_is_relative FROM ducklake_delete_file WHERE end_snapshot IS NULL) f
         JOIN ducklake_table t ON t.table_id = f.table_id AND t.end_snapshot IS NULL JOIN ducklake_schema sc ON sc.schema_id = t.schema_id
         ORDER BY 1`,
      )
    ).getRowsJS() as [string][]
  ).map(([p]) => p);
  return current.filter((p) => !existsSync(path.resolve(paths.root, p)));
}

/**
 * From the disk: partitions holding a stray file, one no snapshot of the catalog lists (something else wrote it, or
 * a killed conversion left it).
 */
async function strayPartitionsOf(conn: DuckDBConnection, paths: LakePaths): Promise<LakeStatus['strayPartitions']> {
  const known = new Set(
    (
      (
        await conn.runAndReadAll(
          `SELECT sc.path || t.path || d.path FROM ducklake_data_file d JOIN ducklake_table t USING (table_id) JOIN ducklake_schema sc ON sc.schema_id = t.schema_id
           UNION ALL SELECT path FROM ducklake_files_scheduled_for_deletion`,
        )
      ).getRowsJS() as [string][]
    ).map(([p]) => path.join(paths.root, p)),
  );
  const out: LakeStatus['strayPartitions'] = [];
  for (const shape of lakeShapes()) {
    for (const p of await diskPartitions(paths, shape)) {
      const strays = p.files.filter((f) => !known.has(f));
      if (strays.length) out.push({ dataset: shape.name, network: p.network, partition: p.value, files: strays.length });
    }
  }
  return out;
}

/** What the run ledger says: the last runs, the watermarks, gaps between committed windows, failures nothing covers since. */
async function ledgerOf(
  conn: DuckDBConnection,
  runs: number,
): Promise<Pick<LakeStatus, 'runs' | 'watermarks' | 'gaps' | 'fetchedWindows' | 'uncoveredFailures'>> {
  const out: Pick<LakeStatus, 'runs' | 'watermarks' | 'gaps' | 'fetchedWindows' | 'uncoveredFailures'> = {
    runs: [],
    watermarks: [],
    gaps: [],
    fetchedWindows: [],
    uncoveredFailures: [],
  };
  if (await relationExists(conn, 'runs')) {
    out.runs = await objects(
      conn,
      `SELECT run_id, job, status, started_at::VARCHAR AS started_at, finished_at::VARCHAR AS finished_at,
              CAST(json_extract(report, '$.totals.rows') AS BIGINT) AS rows, CAST(json_extract(report, '$.totals.rejects') AS BIGINT) AS rejects,
              CAST(json_extract(report, '$.totals.windowsFailed') AS BIGINT) AS windows_failed
       FROM runs ORDER BY started_at DESC, run_id DESC LIMIT ${runs}`,
    );
  }
  if (await relationExists(conn, 'watermarks')) {
    out.watermarks = await objects(
      conn,
      `SELECT network, dataset, scope, block::BIGINT AS block, run_id, updated_at::VARCHAR AS updated_at FROM watermarks ORDER BY network, dataset, scope`,
    );
  }
  if (await relationExists(conn, 'windows')) {
    // Gaps and islands: a committed window that starts after everything before it (same scope) ended leaves a gap.
    out.gaps = await objects(
      conn,
      `WITH w AS (
         SELECT network, dataset, scope, from_block, to_block,
                max(to_block) OVER (PARTITION BY network, dataset, scope ORDER BY from_block, to_block ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS covered_to
         FROM windows WHERE status IN ('committed', 'provisional') AND from_block IS NOT NULL)
       SELECT network, dataset, scope, (covered_to + 1)::BIGINT AS from_block, (from_block - 1)::BIGINT AS to_block
       FROM w WHERE from_block > covered_to + 1 ORDER BY network, dataset, scope, from_block`,
    );
    out.fetchedWindows = await objects(
      conn,
      `SELECT run_id, network, dataset, scope, from_block::BIGINT AS from_block, to_block::BIGINT AS to_block,
              rows_got::BIGINT AS rows, requests::BIGINT AS requests
       FROM windows WHERE status = 'fetched' ORDER BY network, dataset, scope, from_block`,
    );
    out.uncoveredFailures = await objects(
      conn,
      `SELECT f.run_id, f.network, f.dataset, f.scope, f.from_block::BIGINT AS from_block, f.to_block::BIGINT AS to_block, f.error
       FROM windows f
       WHERE f.status = 'failed' AND NOT EXISTS (
         SELECT 1 FROM windows c WHERE c.status IN ('committed', 'provisional') AND c.network = f.network AND c.dataset = f.dataset AND c.scope = f.scope
           AND (f.from_block IS NULL OR (c.from_block <= f.from_block AND c.to_block >= f.to_block)))
       ORDER BY f.network, f.dataset, f.scope, f.from_block`,
    );
  }
  return out;
}

/**
 * Another DuckLake writer's rows are not all in the files' record counts: rows it deleted (delete files, and
 * deletes inlined in the catalog) are subtracted, rows it inlined into the catalog are added, per dataset and
 * network, so that `rows` is what a reader of the newest snapshot reads.
 */
async function countOthersRows(conn: DuckDBConnection, datasets: LakeStatus['datasets']): Promise<void> {
  const adjust = (dataset: string, network: string, n: number) => {
    if (n === 0) return;
    let row = datasets.find((d) => d.dataset === dataset && d.network === network);
    if (!row) {
      row = { dataset, network, partitions: 0, files: 0, rows: 0, bytes: 0, min_block: null, max_block: null };
      datasets.push(row);
    }
    row.rows += n;
  };
  const current = `ducklake_data_file d JOIN ducklake_table t ON t.table_id = d.table_id AND t.end_snapshot IS NULL
    JOIN ducklake_file_partition_value n ON n.data_file_id = d.data_file_id AND n.partition_key_index = 0`;
  for (const r of await objects<{ dataset: string; network: string; n: number }>(
    conn,
    `SELECT t.table_name AS dataset, n.partition_value AS network, sum(x.delete_count)::BIGINT AS n
     FROM ducklake_delete_file x JOIN ${current} ON d.data_file_id = x.data_file_id
     WHERE x.end_snapshot IS NULL AND d.end_snapshot IS NULL GROUP BY ALL`,
  ))
    adjust(r.dataset, r.network, -r.n);
  const inlined = await objects<{ dataset: string; name: string }>(
    conn,
    `SELECT t.table_name AS dataset, i.table_name AS name FROM ducklake_inlined_data_tables i
     JOIN ducklake_table t ON t.table_id = i.table_id AND t.end_snapshot IS NULL`,
  );
  for (const i of inlined) {
    if (!(await relationExists(conn, i.name))) continue;
    for (const r of await objects<{ network: string; n: number }>(
      conn,
      `SELECT network, count(*)::BIGINT AS n FROM ${ident(i.name)} WHERE end_snapshot IS NULL GROUP BY ALL`,
    ))
      adjust(i.dataset, r.network, r.n);
  }
  const tables = await objects<{ table_id: number; dataset: string }>(
    conn,
    `SELECT table_id, table_name AS dataset FROM ducklake_table WHERE end_snapshot IS NULL`,
  );
  for (const t of tables) {
    const name = `ducklake_inlined_delete_${t.table_id}`;
    if (!(await relationExists(conn, name))) continue;
    for (const r of await objects<{ network: string; n: number }>(
      conn,
      `SELECT n.partition_value AS network, count(*)::BIGINT AS n FROM ${ident(name)} x JOIN ${current} ON d.data_file_id = x.file_id
       WHERE d.end_snapshot IS NULL GROUP BY ALL`,
    ))
      adjust(t.dataset, r.network, -r.n);
  }
}
