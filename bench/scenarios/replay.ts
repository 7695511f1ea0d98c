import { mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { getDataset } from '../../src/datasets/registry.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { nativeCopy, withDuckDB } from '../lib/native.js';
import { RecordingTransport, ReplayTransport, datasetOfKey, recordedEntriesAsNdjson } from '../lib/replay.js';
import { target, type Context, type ScenarioResult } from '../lib/result.js';
import { startSimProcess } from '../lib/simproc.js';
import { buildWorkload, describeWorkload, jobDoc } from '../lib/workload.js';

/**
 * 2. Pipeline CPU against DuckDB's native path: the pages of a run, recorded once, replayed from disk through
 * the whole run (pager, transform, staging, commit; no HTTP), beside DuckDB's `read_json` -> typed
 * `COPY ... TO parquet` of the same entries as NDJSON.
 */
export async function replay(ctx: Context): Promise<Omit<ScenarioResult, 'seconds'>> {
  const pages = path.join(ctx.tmp, 'pages.bin');
  const sim = await startSimProcess({ scale: ctx.quick ? 'small' : 'large' });
  let doc: Record<string, unknown>;
  let workload: string;
  try {
    const w = await buildWorkload(sim.info, ctx.quick ? 10_000 : 400_000, ['transactions', 'erc20_transfers', 'event_logs'], ctx.quick ? 6000 : undefined);
    workload = describeWorkload(w);
    ctx.log(`recording ${w.rows} rows: ${workload}`);
    doc = jobDoc(sim.info, w, { lake: path.join(ctx.tmp, 'lake-record') });
    const recorder = new RecordingTransport(pages, 8);
    const rec = await runJob(parseJob(doc, 'bench', process.env), { transportInstance: recorder });
    if (rec.status !== 'complete') throw new Error(`bench: recording run ${rec.status}`);
  } finally {
    await sim.stop();
  }
  await rm(path.join(ctx.tmp, 'lake-record'), { recursive: true, force: true });

  const ndjson = (d: string): string => path.join(ctx.tmp, `${d}.ndjson`);
  const entryRows = await recordedEntriesAsNdjson(pages, datasetOfKey, ndjson);

  // DuckDB native: every dataset's NDJSON -> typed, partitioned ZSTD Parquet, in one fresh instance.
  const nativeDir = path.join(ctx.tmp, 'native');
  let nativeRows = 0;
  const n0 = performance.now();
  const ncpu0 = process.cpuUsage();
  await withDuckDB(async (run) => {
    for (const d of entryRows.keys()) nativeRows += await nativeCopy(run, getDataset(d), ndjson(d), path.join(nativeDir, d));
  });
  const nativeSec = (performance.now() - n0) / 1000;
  const ncpu = process.cpuUsage(ncpu0);

  // Ours: the same job, every call answered from the recording.
  await mkdir(path.join(ctx.tmp, 'lake'), { recursive: true });
  const job = parseJob({ ...doc, lake: path.join(ctx.tmp, 'lake') }, 'bench', process.env);
  const o0 = performance.now();
  const cpu0 = process.cpuUsage();
  const report = await runJob(job, { transportInstance: await ReplayTransport.open(pages) });
  const oursSec = (performance.now() - o0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const oursCpu = (cpu.user + cpu.system) / 1e6;
  if (report.status !== 'complete') throw new Error(`bench: replay run ${report.status}: ${JSON.stringify(report.errors)}`);
  const ours = report.totals.rows / oursSec;
  const native = nativeRows / nativeSec;
  return {
    scenario: 'replay',
    title: 'pipeline CPU: recorded pages from disk through transform + load, beside DuckDB native read_json -> COPY',
    measured: { rows: report.totals.rows, seconds: oursSec, 'rows/s': ours, 'CPU seconds (all threads)': oursCpu, 'pages bytes': (await stat(pages)).size },
    references: {
      'DuckDB native rows': nativeRows,
      'DuckDB native seconds': nativeSec,
      'DuckDB native rows/s': native,
      'DuckDB native CPU seconds': (ncpu.user + ncpu.system) / 1e6,
    },
    targets: [target('ours / native rows/s', ours / native, '>=', 0.4, '×', ctx.quick)],
    notes: [workload, `ours ${report.totals.rows} rows (${[...entryRows].map(([d, n]) => `${d} ${n}`).join(', ')} listed)`],
  };
}
