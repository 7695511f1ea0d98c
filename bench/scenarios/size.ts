import path from 'node:path';
import { mkdir, readdir, stat } from 'node:fs/promises';
import { getDataset } from '../../src/datasets/registry.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { nativeCopy, withDuckDB } from '../lib/native.js';
import { RecordingTransport, datasetOfKey, recordedEntriesAsNdjson } from '../lib/replay.js';
import { target, type Context, type ScenarioResult } from '../lib/result.js';
import { startSimProcess } from '../lib/simproc.js';
import { buildWorkload, describeWorkload, jobDoc } from '../lib/workload.js';

async function bytesUnder(dir: string): Promise<number> {
  let total = 0;
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile() && e.name.endsWith('.parquet')) total += (await stat(path.join(e.parentPath, e.name))).size;
  }
  return total;
}

/**
 * 6. Size: bytes per row of the lake's files against DuckDB's native output of the same entries (the API's
 * rows as NDJSON -> read_json -> typed -> ZSTD Parquet by day, in listing order). Also shown: the lake's own
 * rows rewritten by DuckDB with its defaults + ZSTD (same columns, order and partitions).
 */
export async function size(ctx: Context): Promise<Omit<ScenarioResult, 'seconds'>> {
  const sim = await startSimProcess({ scale: ctx.quick ? 'small' : 'large' });
  const lake = path.join(ctx.tmp, 'lake');
  const pages = path.join(ctx.tmp, 'pages.bin');
  let workload: string;
  try {
    const w = await buildWorkload(sim.info, ctx.quick ? 10_000 : 400_000, ['transactions', 'erc20_transfers', 'event_logs'], ctx.quick ? 6000 : undefined);
    workload = describeWorkload(w);
    const report = await runJob(parseJob(jobDoc(sim.info, w, { lake }), 'bench', process.env), { transportInstance: new RecordingTransport(pages, 8) });
    if (report.status !== 'complete') throw new Error(`bench: export ${report.status}`);
  } finally {
    await sim.stop();
  }
  const ndjson = (d: string): string => path.join(ctx.tmp, `${d}.ndjson`);
  const datasets = [...(await recordedEntriesAsNdjson(pages, datasetOfKey, ndjson)).keys()].sort();
  const measured: Record<string, number> = {};
  const references: Record<string, number> = {};
  let ours = 0,
    oursRows = 0,
    native = 0,
    nativeRows = 0,
    rewrite = 0;
  await withDuckDB(async (run) => {
    // The files of the lake's newest snapshot (a DuckLake keeps earlier snapshots' files until `maintain`).
    await run(`ATTACH '${path.join(lake, 'catalog.duckdb')}' AS lake_catalog (READ_ONLY)`);
    for (const d of datasets) {
      const files = (await run(`SELECT path, bytes FROM lake_catalog.files WHERE dataset = '${d}'`)) as unknown as [string, bigint][];
      const src = `[${files.map(([f]) => `'${path.join(lake, f)}'`).join(', ')}]`;
      const n = Number((await run(`SELECT count(*) FROM read_parquet(${src})`))[0]![0]);
      const a = files.reduce((sum, [, b]) => sum + Number(b), 0);
      const nativeOut = path.join(ctx.tmp, 'native', d);
      const m = await nativeCopy(run, getDataset(d), ndjson(d), nativeOut);
      const b = await bytesUnder(nativeOut);
      const rewriteOut = path.join(ctx.tmp, 'rewrite', d);
      await mkdir(path.dirname(rewriteOut), { recursive: true });
      await run(`COPY (SELECT * FROM read_parquet(${src})) TO '${rewriteOut}' (FORMAT parquet, COMPRESSION zstd, PARTITION_BY (network, block_date))`);
      const c = await bytesUnder(rewriteOut);
      measured[`${d} bytes/row`] = a / n;
      references[`${d} DuckDB native bytes/row`] = b / m;
      references[`${d} lake rows rewritten by DuckDB, bytes/row`] = c / n;
      ours += a;
      oursRows += n;
      native += b;
      nativeRows += m;
      rewrite += c;
    }
  });
  const ratio = ours / oursRows / (native / nativeRows);
  return {
    scenario: 'size',
    title: "size: bytes per row of the lake's Parquet vs DuckDB's native ZSTD output of the same rows",
    measured: { rows: oursRows, ...measured, 'all bytes/row': ours / oursRows },
    references: {
      'DuckDB native rows': nativeRows,
      ...references,
      'all DuckDB native bytes/row': native / nativeRows,
      'all rewritten bytes/row': rewrite / oursRows,
    },
    targets: [target('bytes/row vs DuckDB native ZSTD', ratio, '<=', 1.15, '×', ctx.quick)],
    notes: [workload!, 'the lake carries value_raw companions, _run_id and _ingested_at besides the API fields'],
  };
}
