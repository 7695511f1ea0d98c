import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { RecordBatch } from 'apache-arrow';
import { Accounting } from '../extract/accounting.js';
import { arrowBatches, DEFAULT_BATCH_ROWS } from '../load/read/arrow.js';
import { WholeStream, withEndRow } from '../load/read/query.js';
import { stagedSelect } from '../load/write/commit.js';
import { openEngine } from '../load/engine.js';
import { datasetShape, STAGED_PARTITION } from '../load/schema.js';
import { ident, literal } from '../load/sql.js';
import { RowTransformer } from '../transform/rows.js';
import { executeWindow, stagedOf, StrictRejectsError } from './execute.js';
import { receivingBodies } from './garbage.js';
import type { Job } from './job.js';
import { silentLogger, type Logger } from './log.js';
import { planWindows } from './plan.js';
import { jobHead, needsHead, pagerOptionsOf } from './prepare.js';
import { newRunId } from './run.js';
import { openSource, type SourceOptions } from './source.js';
import { makeScratch } from '../load/scratch.js';
import { ChainlakeError, chainlakeCodeOf } from '../errors.js';

/** What a stream reports of each window once its rows have been handed over. */
export interface StreamedWindow {
  /** The window's id: `<dataset>/<network>/<scope>/<from>-<to>` (or `snapshot`). */
  window: string;
  rows: number;
  /** Entries that did not convert: left out of the batches (a lake keeps them in `_rejects`). */
  rejects: number;
  requests: number;
}

export interface StreamJobOptions extends Pick<SourceOptions, 'simulator' | 'transport'> {
  logger?: Logger;
  /** Rows per record batch (default 16,384). */
  batchRows?: number;
  /** Called after each window's batches. */
  onWindow?: (w: StreamedWindow) => void;
}

/**
 * A job's rows as Arrow record batches, without a lake: each window is fetched and transformed exactly as a run
 * stages it, typed by DuckDB with the lake's casts (`stagedSelect`, the query a commit types with), and read
 * back as batches with the columns and types of the dataset's lake view (its file columns, then `network` and
 * the partition date). One window at a time, in plan order (block chunks ascending), staged in a temporary
 * folder that is removed as each window is handed over; memory stays at about one window's typing plus one
 * batch. Unlike a lake, rows are not merged on their natural key across windows (an API that lists a row in two
 * windows yields it twice) and nothing is resumed. A window that fails ends the stream with its error.
 */
export async function* streamJobBatches(job: Job, opts: StreamJobOptions = {}): AsyncGenerator<RecordBatch, void, undefined> {
  const log = opts.logger ?? silentLogger;
  const started = new Date();
  const runId = newRunId(started);
  const ingestedAt = started.toISOString();
  const dir = await makeScratch('stream');
  const source = await openSource(job.source, { simulator: opts.simulator, transport: opts.transport });
  const engine = await openEngine({ tempDir: path.join(dir, 'duckdb-tmp'), threads: 1 });
  try {
    const { clients } = source;
    // The same head rule as a run: only block-ranged datasets need one (finance and point lookups do not).
    let head = job.what.range.fromBlock;
    if (needsHead(job.what)) head = (await jobHead(job.what, clients, new Accounting())).head;
    const pager = pagerOptionsOf(job.source);
    const transformers = new Map<string, RowTransformer>();
    let index = 0;
    for (const w of planWindows(job.what, head)) {
      let t = transformers.get(w.def.name);
      if (!t) transformers.set(w.def.name, (t = new RowTransformer(w.def, { network: job.what.network, snapshotDate: ingestedAt.slice(0, 10) })));
      // Receiving bodies as a run does: the body pool's spare buffers go once no window fetches (body-pool.ts).
      const outcome = await receivingBodies(() =>
        executeWindow(w, { clients, transformer: t, pager, stagingDir: dir, index: index++, strict: job.lake.strict, log }),
      );
      try {
        if (outcome.error) throw outcome.rejects > 0 && job.lake.strict ? new StrictRejectsError(outcome.rejects) : windowFailure(w.id, outcome.failure);
        const staged = stagedOf(outcome);
        if (staged.stagedFiles.length + staged.pageFiles.length > 0) {
          const shape = datasetShape(w.def);
          const columns = shape.columns.map((c) => `CAST(${ident(c.name)} AS ${c.type}) AS ${ident(c.name)}`).join(', ');
          const order = [...shape.order, ...shape.key.filter((k) => !shape.order.includes(k))].map(ident).join(', ');
          // The partition columns after the dataset's, as the lake's table has them (load/write/lake-tables.ts).
          const partition = [`${literal(job.what.network)} AS network`, `CAST(${ident(STAGED_PARTITION)} AS DATE) AS ${ident(shape.partition)}`];
          const sql =
            `SELECT ${columns}, ${partition.join(', ')} ` +
            `FROM (${stagedSelect(w.def, runId, ingestedAt, staged.stagedFiles, staged.pageFiles)}) ORDER BY ${order}`;
          // With its end row, so that a stream DuckDB stops (storage, memory) fails instead of ending short.
          const result = new WholeStream(await engine.conn.stream(withEndRow(sql)));
          yield* arrowBatches(result, opts.batchRows ?? DEFAULT_BATCH_ROWS);
        }
        opts.onWindow?.({ window: w.id, rows: outcome.rows, rejects: outcome.rejects, requests: outcome.acct.requests });
      } finally {
        await outcome.stage?.discard();
        await outcome.rejectStage?.discard();
        await outcome.pageStage?.discard();
      }
    }
  } finally {
    engine.close();
    await source.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * The error a stream ends with when a window fails: the window's id before its failure's message, with the failure's
 * code and hint (an API error, a refused key, a setting to add), as a run's report gives each failed window's code;
 * a failure without one (a full disk) is CHAINLAKE_WINDOWS_FAILED. The failure itself is its cause.
 */
function windowFailure(window: string, failure: unknown): ChainlakeError {
  const hint = (failure as { hint?: unknown } | null | undefined)?.hint;
  return new ChainlakeError(`${window}: ${(failure as Error | undefined)?.message ?? String(failure)}`, {
    code: chainlakeCodeOf(failure) ?? 'CHAINLAKE_WINDOWS_FAILED',
    cause: failure,
    ...(typeof hint === 'string' ? { hint } : {}),
  });
}
