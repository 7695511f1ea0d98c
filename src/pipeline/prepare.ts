import type { Accounting } from '../extract/accounting.js';
import { PageBudget } from '../extract/budget.js';
import { LearnedCap, type BlockRange, type PagerOptions } from '../extract/pager.js';
import type { Engine } from '../load/engine.js';
import type { LakePaths } from '../load/paths.js';
import { readPlanningState, readLastRun, readRequestUsage, watermarkKey, windowKey, type PlanningState, type ResumePoint } from '../load/state.js';
import type { RunPace } from '../load/ledger/planning.js';
import { voidedText, type VoidedClaim } from '../load/ledger/voided.js';
import { REJECTS_SHAPE } from '../load/schema.js';
import { quotaAccount } from '../extract/quota.js';
import { getDataset } from '../datasets/registry.js';
import { findHead, type FoundHead } from '../extract/head.js';
import { rethrowUnreachable } from '../extract/errors.js';
import type { Clients } from './execute.js';
import type { Job, JobSource, JobWhat } from './job.js';
import type { Logger } from './log.js';
import { ChainlakeError, bugError } from '../errors.js';
import { jobRange, windowIdOf, windowsOf, type Window } from './plan.js';
import { keptKeyOf } from './kept.js';

/**
 * The chain head a job's block ranges end at (the job's own `head`, else found near `near`, the lake's last head,
 * or the job's hint): run, stream and enqueue find it the same way.
 */
export async function jobHead(what: JobWhat, clients: Clients, acct: Accounting, near?: number | null): Promise<FoundHead> {
  if (!clients.explorer)
    throw bugError('the job lists blocks by range, which needs the chain head, and has no explorer client: its check (checkExplorerSource) let it through');
  return findHead(clients.explorer, acct, {
    given: what.range.head,
    near: near ?? what.range.headHint,
    blockPath: clients.paths?.block,
  }).catch(rethrowUnreachable);
}

/**
 * Whether a run of the job needs the chain head: only block-ranged endpoints do (their windows end at it).
 * Snapshots, point lookups (blocks by number included) and finance datasets need none, nor an explorer URL.
 */
export function needsHead(what: JobWhat): boolean {
  return what.datasets.some((d) => getDataset(d.name).endpoints.some((e) => d.endpoints.includes(e.id) && e.blockRange !== undefined));
}

/** The job with this run's range override applied: a frozen copy (the resolved job is never edited). */
export function effectiveJob(job: Job, o: { fromBlock?: number; toBlock?: number; head?: number } | undefined): Job {
  const withRange = (range: Partial<Job['what']['range']>): Job =>
    Object.freeze({ ...job, what: Object.freeze({ ...job.what, range: Object.freeze({ ...job.what.range, ...range }) }) });
  if (o?.head !== undefined) job = withRange({ head: o.head });
  if (!o || (o.fromBlock === undefined && o.toBlock === undefined)) return job;
  const fromBlock = o.fromBlock ?? job.what.range.fromBlock;
  const toBlock = o.toBlock ?? job.what.range.toBlock;
  if (toBlock !== 'head' && toBlock < fromBlock) throw new RangeError(`--to-block ${toBlock} is below --from-block ${fromBlock}`);
  return withRange({ fromBlock, toBlock, incremental: false });
}

/**
 * The committed block ranges of a resume chain per (dataset, network, scope) — the watermark key. Parsed from
 * the resume keys (`windowKey`: dataset|network|scope|from|to; no part but the scope could hold a `|`, and
 * scope keys never do), so snapshot windows (no range) are left out.
 */
export function committedRanges(committed: ReadonlySet<string>): Map<string, BlockRange[]> {
  const out = new Map<string, BlockRange[]>();
  for (const key of committed) {
    const parts = key.split('|');
    if (parts.length < 5) continue;
    const to = parts.pop()!;
    const from = parts.pop()!;
    if (from === '' || to === '') continue;
    const [dataset, network, ...scope] = parts;
    const wk = watermarkKey(dataset!, network!, scope.join('|'));
    const list = out.get(wk) ?? [];
    list.push({ from: Number(from), to: Number(to) });
    out.set(wk, list);
  }
  return out;
}

/** Whether the union of `ranges` holds every block of `r` (a chunk may lie across windows of another size). */
export function covers(ranges: readonly BlockRange[], r: BlockRange): boolean {
  let next = r.from;
  for (const c of [...ranges].sort((a, b) => a.from - b.from)) {
    if (c.from > next) break;
    next = Math.max(next, c.to + 1);
    if (next > r.to) return true;
  }
  return false;
}

/**
 * What this run still has to fetch of the windows `job` plans at `head`. Incremental jobs continue each scope from its watermark minus the
 * safety margin: the chunks wholly below that point are skipped, the one straddling it is narrowed to start
 * there, and a scope already at the pinned head has nothing to do (not even its margin). A resumed run skips
 * the windows its predecessors committed: the same key, or a range its committed windows cover (the
 * watermark may have moved while the killed run committed, narrowing a chunk differently now, or the chunk
 * size changed).
 */
export function narrowWindows(what: JobWhat, head: number, state: PlanningState, resuming: boolean, fullRefresh: boolean): { todo: Window[]; skipped: number } {
  const incremental = what.range.incremental && !fullRefresh;
  // The last block of every block-ranged window family: a watermark there means the scope is done.
  const end = jobRange(what, head).to;
  const claimed = resuming ? claimedKeys(state.resume!) : new Set<string>();
  const done = committedRanges(claimed);
  // Finality: blocks above `final` may still change; a scope with a watermark was committed before, perhaps
  // provisionally, so its windows replace what the lake holds of them (docs/lake.md, "Finality").
  const final = finalBlockOf(what, head);
  const todo: Window[] = [];
  let skipped = 0;
  for (const planned of windowsOf(what, head)) {
    let range: BlockRange | undefined = planned.range;
    const key = watermarkKey(planned.def.name, planned.network, planned.scopeKey);
    const wm = state.watermarks.get(key);
    const w = range && final !== undefined ? { ...planned, replaces: wm !== undefined } : planned;
    if (range && incremental) {
      if (wm !== undefined) {
        const from = Math.max(range.from, wm - what.range.safetyMarginBlocks + 1);
        if (wm >= end || from > range.to) {
          skipped++;
          continue;
        }
        if (from > range.from) range = { from, to: range.to };
      }
    }
    if (resuming) {
      const r = range;
      const committed =
        claimed.has(windowKey(w.def.name, w.network, w.scopeKey, r?.from ?? null, r?.to ?? null)) || (r !== undefined && covers(done.get(key) ?? [], r));
      if (committed) {
        skipped++;
        continue;
      }
    }
    todo.push(...atFinality(range === w.range ? w : { ...w, range, id: windowIdOf(w.def.name, w.network, w.scopeKey, range) }, final));
  }
  return { todo, skipped };
}

/**
 * The windows a resumed chain has: committed, or fetched and kept by a run whose commit could not happen (this run
 * commits them from their kept data: pipeline/kept.ts).
 */
function claimedKeys(resume: ResumePoint): Set<string> {
  const kept = (resume.kept ?? []).flatMap((k) => keptKeyOf(k) ?? []);
  return kept.length ? new Set([...resume.committed, ...kept]) : resume.committed;
}

/** The last final block of a run pinned at `head` (head − finalityDepth), when the job has an unfinal zone. */
export const finalBlockOf = (what: JobWhat, head: number): number | undefined => (what.range.finalityDepth > 0 ? head - what.range.finalityDepth : undefined);

/**
 * A block-ranged window as finality has it when `final` is the last final block: it carries `final` (a window
 * reaching above it is committed as provisional and moves no watermark past it), and a range across `final` is two
 * windows: the final part commits as final, the rest provisional. The one decision for a run's planned windows and
 * for the windows `verify --repair` fetches again (windowsToFetch), on one machine and distributed.
 */
export function atFinality(w: Window, final: number | undefined): Window[] {
  const range = w.range;
  if (!range || final === undefined) return [w];
  if (!(range.from <= final && final < range.to)) return [{ ...w, final }];
  return [
    { from: range.from, to: final },
    { from: final + 1, to: range.to },
  ].map((r) => ({ ...w, final, range: r, id: windowIdOf(w.def.name, w.network, w.scopeKey, r) }));
}

/** The parts of `r` that no range of `ranges` holds, in block order. */
export function subtractRanges(r: BlockRange, ranges: readonly BlockRange[]): BlockRange[] {
  const out: BlockRange[] = [];
  let next = r.from;
  for (const c of [...ranges].sort((a, b) => a.from - b.from)) {
    if (c.to < next) continue;
    if (c.from > r.to) break;
    if (c.from > next) out.push({ from: next, to: c.from - 1 });
    next = Math.max(next, c.to + 1);
    if (next > r.to) return out;
  }
  if (next <= r.to) out.push({ from: next, to: r.to });
  return out;
}

/**
 * The windows a run fetches: the planned chunks of each scope joined where they touch, less what a resumed
 * run committed. A joined range is asked whole: its first page's count says whether it holds anything at
 * all, and the pager cuts it into windows of about WINDOW_ROWS rows (PagerOptions.cutAtRows),
 * so that a range known empty costs one request and a dense one nothing beyond its pages, whatever the
 * chain's height or the chunk size. Each window committed records the block range it holds.
 */
export function joinWindows(windows: readonly Window[], committed: ReadonlyMap<string, readonly BlockRange[]>): Window[] {
  const joined: Window[] = [];
  const last = new Map<string, number>();
  for (const w of windows) {
    if (!w.range) {
      joined.push(w);
      continue;
    }
    const key = watermarkKey(w.def.name, w.network, w.scopeKey);
    const i = last.get(key);
    const prev = i === undefined ? undefined : joined[i]!;
    if (prev?.range && prev.endpoint === w.endpoint && prev.range.to + 1 === w.range.from && prev.range.to !== prev.final) {
      joined[i!] = { ...prev, range: { from: prev.range.from, to: w.range.to } };
      continue;
    }
    last.set(key, joined.length);
    joined.push(w);
  }
  return joined.flatMap((w) => {
    if (!w.range) return [w];
    const done = committed.get(watermarkKey(w.def.name, w.network, w.scopeKey)) ?? [];
    return subtractRanges(w.range, done).map((range) => ({ ...w, range, id: windowIdOf(w.def.name, w.network, w.scopeKey, range) }));
  });
}

/**
 * What planning reads of a lake's run ledger, whichever kind of lake: a local lake's `catalog.duckdb`
 * (localPlanLedger) or a distributed lake's control plane (distributed/plan-ledger.ts). Both read the one
 * ledger schema with the same statements (load/ledger/planning.ts), so `run`, `plan` and `enqueue` plan a job's
 * windows from the same facts with the same code (prepareRun).
 */
export interface PlanLedger {
  /** The lake as a plan names it: a local lake's folder, a control plane's URL without its password. */
  readonly lake: string;
  /** Watermarks, the last head and, on one machine, the unfinished run of the job to resume. */
  state(job: Job): Promise<PlanningState>;
  /** Requests the job's API account spent on `day` (UTC, YYYY-MM-DD), as the ledger counts them for its quota. */
  requestsOn(job: Job, day: string): Promise<number>;
  /** The job's last complete run's requests and seconds: the pace a plan estimates the duration with. */
  lastRun(job: Job): Promise<RunPace | undefined>;
}

/** The ledger of the local lake at `paths` (absent: an empty lake), read through `engine`. */
export function localPlanLedger(engine: Engine, paths: LakePaths): PlanLedger {
  return {
    lake: paths.root,
    state: (job) => readPlanningState(engine, paths, job.name, job.what.network),
    requestsOn: async (job, day) => (await readRequestUsage(engine, paths, quotaAccount(job.source.target))).get(day) ?? 0,
    lastRun: (job) => readLastRun(engine, paths, job.name, job.what.network),
  };
}

export interface Prepared {
  state: PlanningState;
  resume: ResumePoint | undefined;
  /** The pinned head; null when the job has no block-ranged endpoint (snapshots, point lookups, finance). */
  head: number | null;
  /** How the head was found, when this run found it. */
  found?: FoundHead;
  range: BlockRange;
  windows: Window[];
  skipped: number;
  /**
   * Block ranges the resumed run (and the runs it resumed) committed, per watermark key: the committer may
   * advance a watermark through them when this run fills the gap below them.
   */
  committedRanges: Map<string, BlockRange[]>;
  /**
   * The job's datasets whose ledger claims planning found void (their table is gone from the lake, history and
   * all): planned as on an empty lake, and the run (or enqueue) deletes their watermarks before it fetches.
   */
  voided: VoidedClaim[];
}

/**
 * What a run of `job` would fetch now: reads the ledger's watermarks and any unfinished run of the job (which
 * it resumes, with that run's head, unless the range is explicit or a full refresh is asked for), pins the
 * head otherwise (one request), and narrows the planned windows to what the lake does not have yet.
 */
export async function prepareRun(
  job: Job,
  explicitRange: boolean,
  fullRefresh: boolean,
  ledger: PlanLedger,
  clients: Clients,
  acct: Accounting,
): Promise<Prepared> {
  const state = await ledger.state(job);
  // Only the job's own datasets: another's table is made again, and its claims voided, by a run that writes it.
  // `_rejects` every run writes.
  const voided = (state.voided ?? []).filter((v) => v.dataset === REJECTS_SHAPE.name || job.what.datasets.some((d) => d.name === v.dataset));
  const resume = !fullRefresh && !explicitRange ? state.resume : undefined;
  let head: number | null = null;
  let found: FoundHead | undefined;
  if (resume && resume.head !== null) head = resume.head;
  else if (needsHead(job.what)) {
    found = await jobHead(job.what, clients, acct, state.lastHead);
    head = found.head;
  }
  // Without a head no window is block-ranged, so the windows do not depend on it.
  const at = head ?? job.what.range.fromBlock;
  const { todo, skipped } = narrowWindows(job.what, at, state, resume !== undefined, fullRefresh);
  const done = resume ? committedRanges(resume.committed) : new Map<string, BlockRange[]>();
  // The chain's kept windows are left out as its committed ones are; the committer hears of them as they commit.
  const claimed = resume ? committedRanges(claimedKeys(resume)) : done;
  return {
    state,
    resume,
    head,
    found,
    range: jobRange(job.what, at),
    windows: job.what.range.fixedChunks ? todo : joinWindows(todo, claimed),
    skipped,
    committedRanges: done,
    voided,
  };
}

/** What the windows of a run are planned from: the job as the user wrote it, and this run's own choices. */
export interface WindowsRequest {
  /** The job as given, before this run's range override. */
  baseJob: Job;
  /** `baseJob` with this run's range override applied (effectiveJob). */
  job: Job;
  fullRefresh: boolean;
  /** Exactly these windows instead of the planned ones (`verify --repair`). */
  windows?: Window[];
}

/**
 * The windows a run will fetch, as `run`, `plan` and `enqueue` all compute them: prepareRun (lake state, resume, head,
 * finality, narrowing, joining), an explicit list of windows when one is given, and the refusal of an explicit
 * range above the chain (whose "0 windows, complete" would read as success). The pager may still cut a dense
 * window into several as it fetches (cutAtRows); no plan can know where before the rows arrive.
 */
export async function windowsToFetch(req: WindowsRequest, ledger: PlanLedger, clients: Clients, acct: Accounting, log?: Logger): Promise<Prepared> {
  const { job } = req;
  const prepared = await prepareRun(job, job !== req.baseJob || req.windows !== undefined, req.fullRefresh, ledger, clients, acct);
  const { head, range } = prepared;
  // Given windows (a repair's) get the finality the planned ones got: one reaching into the unfinal zone of this
  // run's head stays provisional, and the next run fetches it again.
  const final = head === null ? undefined : finalBlockOf(job.what, head);
  const windows = req.windows?.flatMap((w) => atFinality(w, final)) ?? prepared.windows;
  for (const v of prepared.voided) log?.log('warn', 'ledger.voided', voidedText(v, job.what.network), { ...v, network: job.what.network });
  if (head !== null && range.from > head && !job.what.range.incremental) {
    const what = `blocks ${range.from}-${job.what.range.toBlock === 'head' ? 'head' : job.what.range.toBlock} start above the chain head (block ${head}, pinned now)`;
    if (windows.length === 0)
      throw new ChainlakeError(`${what}: nothing to fetch`, {
        code: 'CHAINLAKE_USAGE',
        hint: "lower --from-block (or the job's range.fromBlock) to the head or below",
      });
    log?.log('warn', 'range.above-head', `${what}: only datasets without a block range have anything to fetch`, { from: range.from, head });
  }
  return { ...prepared, windows };
}

/**
 * How a run (or a stream) pages the job's windows. `cutAtRows`: windows of at most that many rows, each
 * continued by the next (see joinWindows); undefined keeps each window whole.
 */
export function pagerOptionsOf(source: JobSource, cutAtRows?: number): PagerOptions {
  return {
    pageSize: source.pageSize,
    resultWindow: source.resultWindow,
    prefetch: source.concurrency,
    maxDriftRetries: 3,
    budget: new PageBudget(source.concurrency * 2),
    // A cap the server states once holds for every window of the run.
    learnedCap: new LearnedCap(),
    ...(cutAtRows === undefined ? {} : { cutAtRows }),
  };
}
