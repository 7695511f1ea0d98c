import type { Accounting } from '../extract/accounting.js';
import type { BlockRange } from '../extract/pager.js';
import type { Engine } from '../load/engine.js';
import type { LakePaths } from '../load/paths.js';
import { readLakeState, watermarkKey, windowKey, type LakeState, type ResumePoint } from '../load/state.js';
import type { Clients } from './execute.js';
import type { Job } from './job.js';
import { jobRange, planWindows, windowIdOf, type Window } from './plan.js';

/** The job with this run's range override applied. */
export function effectiveJob(job: Job, o: { fromBlock?: number; toBlock?: number } | undefined): Job {
  if (!o || (o.fromBlock === undefined && o.toBlock === undefined)) return job;
  const fromBlock = o.fromBlock ?? job.range.fromBlock;
  const toBlock = o.toBlock ?? job.range.toBlock;
  if (toBlock !== 'head' && toBlock < fromBlock) throw new RangeError(`--to-block ${toBlock} is below --from-block ${fromBlock}`);
  return { ...job, range: { ...job.range, fromBlock, toBlock, incremental: false } };
}

/**
 * What this run still has to fetch. Incremental jobs continue each scope from its watermark minus the
 * safety margin (a scope already at the pinned head has nothing to do); a resumed run skips the windows
 * its predecessor committed.
 */
export function narrowWindows(planned: Window[], job: Job, state: LakeState, resuming: boolean, fullRefresh: boolean): { todo: Window[]; skipped: number } {
  const todo: Window[] = [];
  let skipped = 0;
  for (const w of planned) {
    let range: BlockRange | undefined = w.range;
    if (range && job.range.incremental && !fullRefresh) {
      const wm = state.watermarks.get(watermarkKey(w.def.name, w.network, w.scopeKey));
      if (wm !== undefined) {
        if (wm >= range.to) {
          skipped++;
          continue;
        }
        range = { from: Math.max(range.from, wm - job.range.safetyMarginBlocks + 1), to: range.to };
      }
    }
    if (resuming && state.resume!.committed.has(windowKey(w.def.name, w.network, w.scopeKey, range?.from ?? null, range?.to ?? null))) {
      skipped++;
      continue;
    }
    todo.push(range === w.range ? w : { ...w, range, id: windowIdOf(w.def.name, w.network, w.scopeKey, range) });
  }
  return { todo, skipped };
}

export interface Prepared {
  state: LakeState;
  resume: ResumePoint | undefined;
  head: number;
  range: BlockRange;
  windows: Window[];
  skipped: number;
}

/**
 * What a run of `job` would fetch now: reads the lake's watermarks and any unfinished run of the job (which
 * it resumes, with that run's head, unless the range is explicit or a full refresh is asked for), pins the
 * head otherwise (one request), and narrows the planned windows to what the lake does not have yet.
 */
export async function prepareRun(
  job: Job,
  explicitRange: boolean,
  fullRefresh: boolean,
  engine: Engine,
  paths: LakePaths,
  clients: Clients,
  acct: Accounting,
): Promise<Prepared> {
  const state = await readLakeState(engine, paths, job.name, job.network);
  const resume = !fullRefresh && !explicitRange ? state.resume : undefined;
  const head = resume ? resume.head : await clients.explorer.head(acct);
  const { todo, skipped } = narrowWindows(planWindows(job, head), job, state, resume !== undefined, fullRefresh);
  return { state, resume, head, range: jobRange(job, head), windows: todo, skipped };
}
