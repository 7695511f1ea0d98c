/**
 * `chainlake verify`: does the lake still hold what the API holds, and is it whole? One module for both kinds of
 * lake: the committed windows and the rows are read through the DuckDB connection both readers give (the
 * `windows` ledger view and one view per dataset), the API is asked through the clients a run builds, and the
 * findings go to the `verifications` ledger table through CatalogDb.
 *
 * Count checks ask the API for a one-entry page (`limit=1`) of a scope and block range, whose `count` is the
 * rows the API holds there, and compare it with the lake's rows of that scope and range. Consecutive windows of a
 * scope are asked as one range (their union); only a union whose count differs is split, in halves, and the
 * count of the second half is the union's minus the first's (no request), so a lake that holds costs one request
 * per scope's run of consecutive windows. Honest limits: differences that cancel inside a union (a row missing
 * in one window and one too many in another) are not seen; a window's count is checked only where the lake's rows
 * of a scope can be told (see scopes.ts), elsewhere the window is recorded `not-checked` with the reason.
 */
import { randomBytes } from 'node:crypto';
import type { DuckDBConnection } from '@duckdb/node-api';
import { DATASETS, getDataset } from '../../datasets/registry.js';
import type { DatasetDef } from '../../datasets/dataset.js';
import { Accounting } from '../../extract/accounting.js';
import type { BlockRange } from '../../extract/page.js';
import { QuotaReachedError, quotaAccount, RequestQuota } from '../../extract/quota.js';
import type { VerificationRow } from '../../load/ledger/verifications.js';
import { literal, ident } from '../../load/sql.js';
import { fetcherFor, type Clients } from '../execute.js';
import { abiFromApi } from '../decode-in-run.js';
import type { Job } from '../job.js';
import { planWindows, windowIdOf, type Window } from '../plan.js';
import type { RunOptions } from '../run.js';
import { openSource } from '../source.js';
import { addressScopeOf, type AddressScope } from './scopes.js';
import { timedRowsOutside, WindowRows } from './window-rows.js';
import { blockTimes } from '../block-times.js';
import { replaceable } from '../../datasets/scope-rows.js';
import { convertTimestamp } from '../../transform/convert.js';
import { abiRequests, decodedRowChecks } from './decoded.js';

export interface VerifySelection {
  datasets?: readonly string[];
  /** Scope keys (`address=0x…`) or bare scope values (an address). */
  scopes?: readonly string[];
  fromBlock?: number;
  toBlock?: number;
  /**
   * A time range, UTC days (YYYY-MM-DD, both included): the windows reaching a block of those days. The lake's own
   * rows turn a day into blocks (the API has no block-by-time endpoint): the first block holding a row of `since` or
   * later, the last holding a row of `until` or earlier, over every block-ranged dataset the lake holds.
   */
  since?: string;
  until?: string;
  /** Check this many windows, spread evenly over the selection, instead of all. */
  sample?: number;
}

/** One unit of checking: a committed block range of one scope (overlapping committed windows made disjoint). */
export interface VerifyWindow {
  dataset: string;
  network: string;
  scope: string;
  range: BlockRange;
}

export interface VerifyResult {
  verifyId: string;
  /** Every check's findings, one row per window (or dataset) and check. */
  rows: VerificationRow[];
  /** Requests sent to the API (every attempt), and those the export of the checked windows cost. */
  requests: number;
  exportRequests: number;
  /** The windows whose count differs: what `--repair` fetches again. */
  differing: Window[];
  /** True when every check held (no `differs`). */
  holds: boolean;
  /** Set when the job's daily request quota stopped verify: the windows it could not ask are `not-checked`. */
  quotaReached?: { limit: number };
}

export interface VerifyPlan {
  windows: number;
  /** One request per scope's run of consecutive windows: what a lake that holds costs. */
  requests: number;
  exportRequests: number;
  notCheckable: number;
}

const newVerifyId = (now: Date): string =>
  `verify-${now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')}-${randomBytes(3).toString('hex')}`;

interface Committed {
  dataset: string;
  network: string;
  scope: string;
  from: number | null;
  to: number | null;
  requests: number;
}

/** The job's window templates (dataset, endpoint, scope and query) by dataset and scope key. */
function templatesOf(job: Job): Map<string, Window> {
  const out = new Map<string, Window>();
  for (const w of planWindows(
    job.what,
    Math.max(job.what.range.fromBlock, typeof job.what.range.toBlock === 'number' ? job.what.range.toBlock : job.what.range.fromBlock),
  ))
    out.set(`${w.def.name}\0${w.scopeKey}`, w);
  return out;
}

function selected(c: Committed, sel: VerifySelection): boolean {
  if (sel.datasets?.length && !sel.datasets.includes(c.dataset)) return false;
  if (sel.scopes?.length && !sel.scopes.some((s) => s === c.scope || c.scope.split('&').some((kv) => kv.split('=')[1]?.toLowerCase() === s.toLowerCase())))
    return false;
  if (sel.fromBlock !== undefined && c.to !== null && c.to < sel.fromBlock) return false;
  if (sel.toBlock !== undefined && c.from !== null && c.from > sel.toBlock) return false;
  return true;
}

/** Committed ranges of one scope made disjoint (a later window that overlaps an earlier one keeps only its new blocks). */
function disjoint(ranges: readonly BlockRange[]): { units: BlockRange[]; overlaps: number } {
  const sorted = [...ranges].sort((a, b) => a.from - b.from || a.to - b.to);
  const units: BlockRange[] = [];
  let overlaps = 0;
  for (const r of sorted) {
    const last = units.at(-1);
    if (last && r.from <= last.to) {
      overlaps++;
      if (r.to > last.to) units.push({ from: last.to + 1, to: r.to });
    } else units.push({ ...r });
  }
  return { units, overlaps };
}

/** Evenly spread picks of `n` of `items` (deterministic: the same lake gives the same sample). */
function sampleOf<T>(items: readonly T[], n: number): T[] {
  if (n >= items.length) return [...items];
  return Array.from({ length: n }, (_, i) => items[Math.floor((i * items.length) / n)]!);
}

async function rowsOf(conn: DuckDBConnection, sql: string): Promise<Record<string, unknown>[]> {
  return (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[];
}

async function relationExists(conn: DuckDBConnection, name: string): Promise<boolean> {
  const r = await rowsOf(
    conn,
    `SELECT 1 FROM duckdb_tables() WHERE table_name = ${literal(name)} UNION ALL SELECT 1 FROM duckdb_views() WHERE view_name = ${literal(name)}`,
  );
  return r.length > 0;
}

/** The condition keeping the rows `spec`'s endpoint gave, where the dataset records it (`alias`: a table alias and dot). */
const endpointFilter = (spec: AddressScope, alias: string): string =>
  spec.endpoint ? ` AND ${alias}${ident(spec.endpoint.column)} = ${literal(spec.endpoint.id)}` : '';

/** The rows of each scope address per block, of one dataset and network: counts of any block range are sums of it. */
class ScopeRows {
  private readonly blocks = new Map<string, { block: number[]; prefix: number[] }>();

  static async read(conn: DuckDBConnection, dataset: string, network: string, spec: AddressScope, addresses: readonly string[]): Promise<ScopeRows> {
    const out = new ScopeRows();
    if (addresses.length === 0 || !(await relationExists(conn, dataset))) return out;
    const cols = spec.columns.map((c) => `lower(${ident(c)})`).join(', ');
    const rows = await rowsOf(
      conn,
      `SELECT a, b, count(*) AS n FROM (
         SELECT ${ident(spec.blockColumn)} AS b, unnest(list_distinct(list_filter([${cols}], x -> x IS NOT NULL))) AS a
         FROM ${ident(dataset)} WHERE network = ${literal(network)}${endpointFilter(spec, '')})
       WHERE a IN (${addresses.map((a) => literal(a.toLowerCase())).join(', ')}) GROUP BY a, b ORDER BY a, b`,
    );
    for (const r of rows) {
      const a = String(r.a);
      let e = out.blocks.get(a);
      if (!e) out.blocks.set(a, (e = { block: [], prefix: [0] }));
      e.block.push(Number(r.b));
      e.prefix.push(e.prefix.at(-1)! + Number(r.n));
    }
    return out;
  }

  /** The lake's rows of `address` in `range`. */
  count(address: string, range: BlockRange): number {
    const e = this.blocks.get(address.toLowerCase());
    if (!e) return 0;
    const lower = (x: number): number => {
      let lo = 0,
        hi = e.block.length;
      while (lo < hi) {
        const m = (lo + hi) >>> 1;
        if (e.block[m]! < x) lo = m + 1;
        else hi = m;
      }
      return lo;
    };
    return e.prefix[lower(range.to + 1)]! - e.prefix[lower(range.from)]!;
  }
}

/** An API whose listing ignores its block range filter: counts of it say nothing about a range. */
class RangeIgnored extends Error {}

export interface VerifyDeps {
  conn: DuckDBConnection;
  /** How the API is reached: as a run reaches it (the embedded simulator, or the job's URLs). */
  run?: Pick<RunOptions, 'simulator' | 'transport'>;
  now?: () => Date;
  /** Estimate only: no request is sent. */
  plan?: boolean;
  /** The account verify's requests count against (request_usage); the job's explorer base URL when not given. */
  account?: string;
}

interface ScopeGroup {
  dataset: string;
  network: string;
  scope: string;
  template: Window | undefined;
  units: BlockRange[];
  overlaps: number;
  exportRequests: number;
}

/** `sel`'s block bounds narrowed by its days (see VerifySelection.since): a day no row reaches selects nothing. */
async function blocksOfDays(conn: DuckDBConnection, network: string, sel: VerifySelection): Promise<{ fromBlock?: number; toBlock?: number }> {
  const timed: DatasetDef[] = [];
  for (const def of Object.values(DATASETS))
    if (def.blockColumn && def.partitionFrom && def.partition === 'block_date' && (await relationExists(conn, def.name))) timed.push(def);
  const bound = async (agg: 'min' | 'max', condition: string): Promise<number | undefined> => {
    if (timed.length === 0) return undefined;
    const parts = timed.map(
      (d) =>
        `SELECT ${agg}(${ident(d.blockColumn!)}) AS b FROM ${ident(d.name)} WHERE network = ${literal(network)} AND ${ident(d.partitionFrom!)} ${condition}`,
    );
    const r = await rowsOf(conn, `SELECT ${agg}(b) AS b FROM (${parts.join(' UNION ALL ')})`);
    return r[0]?.b === null || r[0]?.b === undefined ? undefined : Number(r[0].b);
  };
  const out: { fromBlock?: number; toBlock?: number } = { fromBlock: sel.fromBlock, toBlock: sel.toBlock };
  // Nothing of the days: a range no window reaches (from above every block, to below every block).
  if (sel.since !== undefined) {
    const b = (await bound('min', `>= CAST(${literal(sel.since)} AS DATE)`)) ?? Number.MAX_SAFE_INTEGER;
    out.fromBlock = Math.max(out.fromBlock ?? 0, b);
  }
  if (sel.until !== undefined) {
    const b = (await bound('max', `< CAST(${literal(sel.until)} AS DATE) + INTERVAL 1 DAY`)) ?? -1;
    out.toBlock = Math.min(out.toBlock ?? Number.MAX_SAFE_INTEGER, b);
  }
  return out;
}

/**
 * Reads the committed windows of `job`'s network that `sel` selects, grouped by scope. A provisional window (finality:
 * it reaches into the unfinal zone, the next run fetches it again) holds its rows in the lake as a committed one does.
 */
async function scopeGroups(conn: DuckDBConnection, job: Job, sel: VerifySelection): Promise<{ groups: ScopeGroup[]; snapshots: Committed[] }> {
  const committed: Committed[] = (
    await rowsOf(
      conn,
      `SELECT dataset, network, scope, from_block, to_block, coalesce(requests, 0) AS requests FROM windows
       WHERE status IN ('committed', 'provisional') AND network = ${literal(job.what.network)} ORDER BY dataset, scope, from_block`,
    )
  ).map((r) => ({
    dataset: String(r.dataset),
    network: String(r.network),
    scope: String(r.scope),
    from: r.from_block === null ? null : Number(r.from_block),
    to: r.to_block === null ? null : Number(r.to_block),
    requests: Number(r.requests),
  }));
  if (sel.since !== undefined || sel.until !== undefined) sel = { ...sel, ...(await blocksOfDays(conn, job.what.network, sel)) };
  const templates = templatesOf(job);
  const groups = new Map<string, ScopeGroup & { ranges: BlockRange[] }>();
  const snapshots: Committed[] = [];
  for (const c of committed.filter((c) => selected(c, sel))) {
    if (c.from === null || c.to === null) {
      snapshots.push(c);
      continue;
    }
    const key = `${c.dataset}\0${c.scope}`;
    let g = groups.get(key);
    if (!g)
      groups.set(
        key,
        (g = { dataset: c.dataset, network: c.network, scope: c.scope, template: templates.get(key), units: [], overlaps: 0, exportRequests: 0, ranges: [] }),
      );
    g.ranges.push({ from: c.from, to: c.to });
    g.exportRequests += c.requests;
  }
  const out: ScopeGroup[] = [];
  for (const g of groups.values()) {
    const { units, overlaps } = disjoint(g.ranges);
    out.push({ ...g, units, overlaps });
  }
  if (sel.sample !== undefined) {
    // The sample is of windows: each group keeps the picked units.
    const all = out.flatMap((g) => g.units.map((u) => ({ g, u })));
    const picked = new Set(sampleOf(all, sel.sample));
    for (const g of out) g.units = g.units.filter((u) => [...picked].some((p) => p.g === g && p.u === u));
    return { groups: out.filter((g) => g.units.length > 0), snapshots: [] };
  }
  return { groups: out, snapshots };
}

/** Runs of consecutive units (each next one starts right after the previous one ends). */
function consecutiveRuns(units: readonly BlockRange[]): BlockRange[][] {
  const runs: BlockRange[][] = [];
  for (const u of units) {
    const last = runs.at(-1);
    if (last && last.at(-1)!.to + 1 === u.from) last.push(u);
    else runs.push([u]);
  }
  return runs;
}

const unionOf = (units: readonly BlockRange[]): BlockRange => ({ from: units[0]!.from, to: units.at(-1)!.to });

/** Why a group's counts cannot be compared, if they cannot. */
function notCheckable(g: ScopeGroup): string | undefined {
  if (!g.template) return 'the job does not name this scope (verify asks the API through the job: name the scope in it)';
  const ep = g.template.endpoint;
  if (ep.paging.kind !== 'offset') return `${g.dataset}'s endpoint cannot page, so it gives no count of a range`;
  if (!ep.blockRange) return `${g.dataset}'s endpoint has no block range filter`;
  const def = g.template.def;
  if (def.blockColumn === undefined && def.blockTimeColumn === undefined)
    return `${g.dataset}'s rows carry no block number or block time, so the lake cannot count a block range of them`;
  if (!addressScopeOf(def, ep.id) && !replaceable(def, ep)) return `verify does not know which of ${g.dataset}'s rows the API's count of a scope includes`;
  return undefined;
}

/** What `verify` would ask: one request per scope's run of consecutive windows when everything holds. */
export async function planVerify(conn: DuckDBConnection, job: Job, sel: VerifySelection): Promise<VerifyPlan> {
  const { groups } = await scopeGroups(conn, job, sel);
  let requests = 0,
    windows = 0,
    notCheck = 0,
    exportRequests = 0;
  // A count by time asks the block times of its range's ends, each block once (blockTimes remembers them).
  const timed = new Set<number>();
  for (const g of groups) {
    windows += g.units.length;
    exportRequests += g.exportRequests;
    if (notCheckable(g)) notCheck += g.units.length;
    else {
      const runs = consecutiveRuns(g.units);
      requests += runs.length;
      if (g.template!.def.blockColumn === undefined) for (const r of runs.map(unionOf)) timed.add(r.from).add(r.to);
    }
  }
  requests += timed.size;
  requests += await abiRequests(conn, job, sel.datasets, (name) => relationExists(conn, name));
  return { windows, requests, exportRequests, notCheckable: notCheck };
}

/** What the checks found, in the order they found it, and the windows whose count differs (what `--repair` fetches). */
class Findings {
  readonly rows: VerificationRow[] = [];
  readonly differing: Window[] = [];

  constructor(readonly network: string) {}

  /** One window's count finding. */
  count(g: ScopeGroup, u: BlockRange, status: VerificationRow['status'], lake: number | null, api: number | null, detail: string): void {
    this.rows.push({
      network: this.network,
      check: 'count',
      dataset: g.dataset,
      scope: g.scope,
      fromBlock: u.from,
      toBlock: u.to,
      status,
      lakeCount: lake,
      apiCount: api,
      detail,
    });
  }

  /** A window of `t`'s scope whose count differs: one `--repair` fetches again. */
  differs(t: Window, g: ScopeGroup, u: BlockRange): void {
    this.differing.push({ ...t, range: u, id: windowIdOf(g.dataset, this.network, g.scope, u) });
  }

  /** Every window of a scope group recorded as not checked, with why. */
  notChecked(g: ScopeGroup, detail: string): void {
    for (const u of g.units) this.count(g, u, 'not-checked', null, null, detail);
  }

  /** Whether the rows a scope's listing gave lie in the block range asked. */
  rangeFilter(g: ScopeGroup, status: VerificationRow['status'], detail: string): void {
    this.rows.push({
      network: this.network,
      check: 'range_filter',
      dataset: g.dataset,
      scope: g.scope,
      fromBlock: null,
      toBlock: null,
      status,
      lakeCount: null,
      apiCount: null,
      detail,
    });
  }

  /** Drops a scope's count findings and its differing windows: what was found of it is no evidence after all. */
  forget(g: ScopeGroup): void {
    for (let i = this.rows.length - 1; i >= 0; i--)
      if (this.rows[i]!.check === 'count' && this.rows[i]!.dataset === g.dataset && this.rows[i]!.scope === g.scope) this.rows.splice(i, 1);
    for (let i = this.differing.length - 1; i >= 0; i--)
      if (this.differing[i]!.def.name === g.dataset && this.differing[i]!.scopeKey === g.scope) this.differing.splice(i, 1);
  }

  /** Snapshot windows, never counted: the API holds today's state. */
  snapshotsNotChecked(snapshots: readonly Committed[]): void {
    for (const s of snapshots)
      this.rows.push({
        network: this.network,
        check: 'count',
        dataset: s.dataset,
        scope: s.scope,
        fromBlock: null,
        toBlock: null,
        status: 'not-checked',
        lakeCount: null,
        apiCount: null,
        detail: 'a snapshot window (no block range): the API holds today’s state, not the one the lake took',
      });
  }
}

/** Runs every check on the selected windows of `job`'s lake (read through `deps.conn`). Sends only count requests (and ABI requests, see decoded.ts). */
export async function verifyLake(job: Job, sel: VerifySelection, deps: VerifyDeps): Promise<VerifyResult> {
  const now = deps.now ?? (() => new Date());
  const verifyId = newVerifyId(now());
  const { groups, snapshots } = await scopeGroups(deps.conn, job, sel);
  const findings = new Findings(job.what.network);
  const acct = new Accounting();
  const quota = await quotaOf(deps.conn, job, deps.account ?? verifyAccount(job), now);
  const source = await openSource(job.source, { simulator: deps.run?.simulator, transport: deps.run?.transport, ...(quota ? { quota } : {}) });
  let quotaReached: QuotaReachedError | undefined;
  try {
    const explorer = source.clients.explorer;
    // One asker of block times for the counts and the checks after them: blockTimes remembers each block per client.
    const asks = explorer && { fetchAbi: abiFromApi(explorer, acct), timesOf: (r: BlockRange) => blockTimes(explorer, acct, r, source.clients.paths?.block) };
    quotaReached = await askTheApi(groups, deps.conn, source.clients, findings, acct, asks?.timesOf);
    findings.snapshotsNotChecked(snapshots);
    findings.rows.push(...(await checkOffline(deps.conn, job, sel, groups, quotaReached ? undefined : asks)));
  } finally {
    await source.close();
  }
  return {
    verifyId,
    rows: findings.rows,
    requests: acct.requests,
    exportRequests: groups.reduce((n, g) => n + g.exportRequests, 0),
    differing: findings.differing,
    holds: findings.rows.every((r) => r.status !== 'differs'),
    ...(quotaReached ? { quotaReached: { limit: quotaReached.limit } } : {}),
  };
}

/** The job's daily quota as verify's requests count against it: a run's (request_usage, the same account). */
async function quotaOf(conn: DuckDBConnection, job: Job, account: string, now: () => Date): Promise<RequestQuota | undefined> {
  if (job.source.dailyRequestQuota === undefined) return undefined;
  const used = await rowsOf(conn, `SELECT CAST(day AS VARCHAR) AS day, sum(requests) AS n FROM request_usage WHERE account = ${literal(account)} GROUP BY 1`);
  return new RequestQuota(job.source.dailyRequestQuota, new Map(used.map((r) => [String(r.day), Number(r.n)])), now);
}

/**
 * Counts against the API, scope group by scope group. At the job's daily quota verify stops asking, and every window
 * it could not ask is recorded not checked; returns the quota reached, if it was.
 */
async function askTheApi(
  groups: readonly ScopeGroup[],
  conn: DuckDBConnection,
  clients: Clients,
  findings: Findings,
  acct: Accounting,
  timesOf?: OfflineAsks['timesOf'],
): Promise<QuotaReachedError | undefined> {
  let quotaReached: QuotaReachedError | undefined;
  const lakeRows = new LakeRows(conn, findings.network, groups);
  for (const g of groups) {
    if (quotaReached) {
      findings.notChecked(g, quotaReached.message);
      continue;
    }
    const reason = notCheckable(g);
    const t = g.template;
    if (reason || !t) {
      findings.notChecked(g, reason ?? '');
      continue;
    }
    const lake = await lakeCount(t, g, lakeRows, { conn, timesOf, exists: await relationExists(conn, g.dataset) });
    quotaReached = await checkScope({ g, t, lake, apiCount: apiCounter(fetcherFor(t, clients), t.def, lake, acct), findings });
  }
  return quotaReached;
}

/** The lake's rows per scope address, read once per dataset and endpoint (a dataset may list one scope through two endpoints). */
class LakeRows {
  private readonly read = new Map<string, ScopeRows>();

  constructor(
    private readonly conn: DuckDBConnection,
    private readonly network: string,
    private readonly groups: readonly ScopeGroup[],
  ) {}

  async of(dataset: string, endpoint: string, spec: AddressScope): Promise<ScopeRows> {
    const listing = `${dataset}/${endpoint}`;
    let rows = this.read.get(listing);
    if (!rows) {
      const addresses = this.groups
        .filter((x) => x.dataset === dataset && x.template?.endpoint.id === endpoint && x.template.scope.address)
        .map((x) => x.template!.scope.address!);
      this.read.set(listing, (rows = await ScopeRows.read(this.conn, dataset, this.network, spec, addresses)));
    }
    return rows;
  }
}

/**
 * The lake's rows of one scope in a block range. `perWindow`: cheap enough to give each window held inside a
 * counted range its own count (a count by time asks the block times of its range's ends: those are not).
 */
interface LakeCount {
  rows(r: BlockRange): Promise<number>;
  perWindow: boolean;
  /** The times of a range's ends, for a listing whose rows carry a block time only (to check the entries listed). */
  timesOf?: (r: BlockRange) => Promise<{ from: string; to: string }>;
}

/**
 * How the lake's rows of a scope group are counted: an address scope by the per-block sums read once per listing
 * (ScopeRows), any other window whose rows can be told (window-rows.ts, event_logs' contract and topics by the
 * block times of the range's ends) by a query per range.
 */
async function lakeCount(
  t: Window,
  g: ScopeGroup,
  lakeRows: LakeRows,
  ctx: { conn: DuckDBConnection; timesOf: OfflineAsks['timesOf'] | undefined; exists: boolean },
): Promise<LakeCount> {
  const spec = addressScopeOf(t.def, t.endpoint.id);
  if (spec) {
    const rows = await lakeRows.of(g.dataset, t.endpoint.id, spec);
    return { rows: async (r) => rows.count(t.scope.address!, r), perWindow: true };
  }
  const w = new WindowRows(ctx.conn, t.def, g.network, t, ctx.timesOf, ctx.exists);
  return { rows: (r) => w.count(r), perWindow: !w.byTime, ...(w.byTime ? { timesOf: (r: BlockRange) => w.timesOf(r) } : {}) };
}

/** The API's count of a scope's rows in a block range: a one-entry page of its listing. */
function apiCounter(fetcher: ReturnType<typeof fetcherFor>, def: DatasetDef, lake: LakeCount, acct: Accounting): (r: BlockRange) => Promise<number> {
  return async (r) => {
    const page = await fetcher({ offset: 0, limit: 1, range: r }, acct);
    // The entry must lie in the range asked: an API that ignores the filter counts something else.
    const first = page.entries[0] as Record<string, unknown> | undefined;
    if (first) {
      const outside = await outsideRange(first, r, def, lake);
      if (outside) throw new RangeIgnored(`asked blocks ${r.from}-${r.to}, the API listed a row of ${outside}: it ignores the block range filter`);
    }
    return page.count;
  };
}

/** Where an entry listed for range `r` lies when outside it (`block 12`, `2024-03-02T…`), by its block number or time. */
async function outsideRange(entry: Record<string, unknown>, r: BlockRange, def: DatasetDef, lake: LakeCount): Promise<string | undefined> {
  if (def.blockColumn !== undefined) {
    const b = Number(entry[def.blockColumn]);
    return Number.isSafeInteger(b) && (b < r.from || b > r.to) ? `block ${b}` : undefined;
  }
  const time = def.blockTimeColumn === undefined ? undefined : convertTimestamp(entry[def.blockTimeColumn]);
  if (typeof time !== 'string' || !lake.timesOf) return undefined;
  const { from, to } = await lake.timesOf(r);
  return Date.parse(time) < Date.parse(from) || Date.parse(time) > Date.parse(to) ? `a block of ${time}` : undefined;
}

/** One scope group's count check: the lake's rows of its scope, and how the API is asked for a range's count. */
interface ScopeCheck {
  g: ScopeGroup;
  t: Window;
  lake: LakeCount;
  apiCount: (r: BlockRange) => Promise<number>;
  findings: Findings;
}

/** Checks a scope group's counts, run of consecutive windows by run; returns the quota reached, if it was. */
async function checkScope(c: ScopeCheck): Promise<QuotaReachedError | undefined> {
  try {
    for (const run of consecutiveRuns(c.g.units)) await checkUnits(c, run);
    c.findings.rangeFilter(c.g, 'held', 'the rows listed lie in the block range asked');
    return undefined;
  } catch (e) {
    if (!(e instanceof RangeIgnored) && !(e instanceof QuotaReachedError)) throw e;
    // Counts of a listing that ignores its range are not evidence, and a scope the quota cut short was not
    // asked whole (a union's count split in halves is known only once both halves are): nothing of this scope
    // is marked by them.
    c.findings.forget(c.g);
    c.findings.notChecked(c.g, e.message);
    if (e instanceof QuotaReachedError) return e;
    c.findings.rangeFilter(c.g, 'differs', e.message);
    return undefined;
  }
}

/** Checks a run of units whose API count may already be known (the rest of a split union). */
async function checkUnits(c: ScopeCheck, units: BlockRange[], known?: number): Promise<void> {
  const union = unionOf(units);
  const api = known ?? (await c.apiCount(union));
  const lake = await c.lake.rows(union);
  if (api === lake) {
    for (const u of units)
      c.findings.count(
        c.g,
        u,
        'held',
        units.length === 1 ? lake : c.lake.perWindow ? await c.lake.rows(u) : null,
        units.length === 1 ? api : null,
        units.length === 1 ? '' : `held as part of blocks ${union.from}-${union.to} (${api} rows)`,
      );
    return;
  }
  if (units.length === 1) {
    const u = units[0]!;
    c.findings.count(
      c.g,
      u,
      'differs',
      lake,
      api,
      lake < api ? `the lake lacks ${api - lake} rows the API lists` : `the lake holds ${lake - api} rows the API no longer lists`,
    );
    c.findings.differs(c.t, c.g, u);
    return;
  }
  const half = Math.ceil(units.length / 2);
  const left = units.slice(0, half);
  const leftApi = await c.apiCount(unionOf(left));
  await checkUnits(c, left, leftApi);
  await checkUnits(c, units.slice(half), api - leftApi);
}

/**
 * The checks that need no request, against every committed window of the selected datasets and scopes: a row beside
 * a window the selection left out (a block or day range, a sample) is no row outside the lake's windows. Rows are
 * taken in the selection's blocks only.
 */
async function checkOffline(
  conn: DuckDBConnection,
  job: Job,
  sel: VerifySelection,
  groups: readonly ScopeGroup[],
  asked?: OfflineAsks,
): Promise<VerificationRow[]> {
  const partial = sel.fromBlock !== undefined || sel.toBlock !== undefined || sel.since !== undefined || sel.until !== undefined || sel.sample !== undefined;
  const whole = partial ? (await scopeGroups(conn, job, { datasets: sel.datasets, scopes: sel.scopes })).groups : groups;
  const bounds = sel.since !== undefined || sel.until !== undefined ? await blocksOfDays(conn, job.what.network, sel) : sel;
  return [
    ...(await offlineChecks(conn, job, whole, { from: bounds.fromBlock, to: bounds.toBlock }, partial ? undefined : asked?.timesOf)),
    ...(await decodedRowChecks(conn, job, { datasets: sel.datasets, partial, exists: (name) => relationExists(conn, name), fetchAbi: asked?.fetchAbi })),
  ];
}

/**
 * What the checks without count requests may still ask the API, as a run would and counted as verify's: a
 * contract's ABI (decoded rows), the times of a block range's ends (event_logs' windows: asked already by the
 * count check, so answered from blockTimes' memory when the selection is the whole lake).
 */
interface OfflineAsks {
  fetchAbi: (address: string) => Promise<unknown>;
  timesOf: (r: BlockRange) => Promise<{ from: string; to: string }>;
}

/** A finding of no window (a dataset's, or the lake's). */
type LakeFinding = Omit<VerificationRow, 'check' | 'status' | 'detail'>;

/** Gaps between a scope's committed windows, rows outside them, duplicate keys, nonce holes. */
async function offlineChecks(
  conn: DuckDBConnection,
  job: Job,
  groups: readonly ScopeGroup[],
  bounds: { from?: number; to?: number } = {},
  timesOf?: OfflineAsks['timesOf'],
): Promise<VerificationRow[]> {
  const out: VerificationRow[] = groups.flatMap((g) => gapChecks(job.what.network, g));
  for (const name of new Set(groups.map((g) => g.dataset))) {
    if (!(await relationExists(conn, name))) continue;
    const ds: LakeFinding = { network: job.what.network, dataset: name, scope: null, fromBlock: null, toBlock: null, lakeCount: null, apiCount: null };
    out.push(await duplicateKeys(conn, ds));
    out.push(
      await rowsInWindows(
        conn,
        ds,
        groups.filter((g) => g.dataset === name && g.template),
        bounds,
        timesOf,
      ),
    );
    if (name === 'transactions')
      out.push(
        ...(await nonceChecks(
          conn,
          job,
          groups.filter((g) => g.dataset === name),
        )),
      );
  }
  return out;
}

/** The blocks between a scope's committed windows that none covers, or that there are none. */
function gapChecks(network: string, g: ScopeGroup): VerificationRow[] {
  const base = { network, lakeCount: null, apiCount: null, check: 'gaps', dataset: g.dataset, scope: g.scope } as const;
  const gaps: VerificationRow[] = [];
  for (let i = 1; i < g.units.length; i++)
    if (g.units[i]!.from > g.units[i - 1]!.to + 1)
      gaps.push({
        ...base,
        fromBlock: g.units[i - 1]!.to + 1,
        toBlock: g.units[i]!.from - 1,
        status: 'differs',
        detail: 'no committed window covers these blocks',
      });
  if (gaps.length > 0 || g.units.length === 0) return gaps;
  return [
    {
      ...base,
      fromBlock: g.units[0]!.from,
      toBlock: g.units.at(-1)!.to,
      status: 'held',
      detail: g.overlaps ? `${g.overlaps} windows overlap earlier ones (fetched again; rows merge by natural key)` : '',
    },
  ];
}

/** One row per natural key within a partition: the commit's promise. */
async function duplicateKeys(conn: DuckDBConnection, ds: LakeFinding): Promise<VerificationRow> {
  const def = getDataset(ds.dataset);
  const key = [def.partition, ...def.naturalKey].map(ident).join(', ');
  const dup = await rowsOf(
    conn,
    `SELECT count(*) AS keys, coalesce(sum(n - 1), 0) AS extra FROM (SELECT count(*) AS n FROM ${ident(ds.dataset)} WHERE network = ${literal(ds.network)} GROUP BY ${key} HAVING count(*) > 1)`,
  );
  const extra = Number(dup[0]!.extra);
  return {
    ...ds,
    check: 'duplicate_keys',
    status: extra ? 'differs' : 'held',
    detail: extra ? `${Number(dup[0]!.keys)} natural keys have ${extra} rows too many` : '',
  };
}

/**
 * Every row of a scope lies in a committed window of a scope it belongs to: per endpoint, where the dataset tells
 * which endpoint gave a row (two endpoints without that could list one row in either's windows).
 */
async function rowsInWindows(
  conn: DuckDBConnection,
  ds: LakeFinding,
  ofDs: readonly ScopeGroup[],
  bounds: { from?: number; to?: number },
  timesOf?: OfflineAsks['timesOf'],
): Promise<VerificationRow> {
  const def = getDataset(ds.dataset);
  const endpoints = [...new Set(ofDs.map((g) => g.template!.endpoint.id))];
  const specs = endpoints.map((id) => [id, addressScopeOf(def, id)] as const);
  if (def.blockColumn === undefined) return rowsInTimedWindows(conn, ds, def, ofDs, timesOf);
  if (specs.length === 0 || specs.some(([, spec]) => !spec || (!spec.endpoint && endpoints.length > 1)))
    return { ...ds, check: 'rows_in_windows', status: 'not-checked', detail: `verify does not know which scope each of ${ds.dataset}'s rows belongs to` };
  let n = 0,
    lo = Infinity,
    hi = -Infinity;
  for (const [id, spec] of specs) {
    const outside = await rowsOutside(
      conn,
      ds,
      spec!,
      ofDs.filter((g) => g.template!.endpoint.id === id),
      bounds,
    );
    n += outside.n;
    if (outside.n) {
      lo = Math.min(lo, outside.lo);
      hi = Math.max(hi, outside.hi);
    }
  }
  return {
    ...ds,
    check: 'rows_in_windows',
    status: n ? 'differs' : 'held',
    detail: n ? `${n} rows of blocks ${lo}-${hi} lie outside every committed window of their scopes` : '',
  };
}

/**
 * rows_in_windows for a dataset whose rows carry a block time but no block number (event_logs): its scopes' rows
 * outside every committed window, each run of consecutive windows told by the times of its ends. Those times are
 * what the count check asked; a selection of blocks or days, a quota reached or no block endpoint leaves it unchecked.
 */
async function rowsInTimedWindows(
  conn: DuckDBConnection,
  ds: LakeFinding,
  def: DatasetDef,
  ofDs: readonly ScopeGroup[],
  timesOf: OfflineAsks['timesOf'] | undefined,
): Promise<VerificationRow> {
  const row = (status: VerificationRow['status'], detail: string): VerificationRow => ({ ...ds, check: 'rows_in_windows', status, detail });
  const mine = ofDs.filter((g) => replaceable(def, g.template!.endpoint));
  if (def.blockTimeColumn === undefined || mine.length === 0 || mine.length < ofDs.length)
    return row('not-checked', `verify does not know which scope each of ${ds.dataset}'s rows belongs to`);
  if (!timesOf)
    return row(
      'not-checked',
      `${ds.dataset}'s rows carry no block number: their windows are told by their blocks' times, asked for the whole lake only (not a selection of blocks, days or a sample, nor past the quota)`,
    );
  try {
    const scopes = [];
    for (const g of mine)
      scopes.push({
        endpoint: g.template!.endpoint,
        scope: g.template!.scope,
        runs: await Promise.all(consecutiveRuns(g.units).map(async (run) => ({ range: unionOf(run), times: await timesOf(unionOf(run)) }))),
      });
    const out = await timedRowsOutside(conn, def, ds.network, scopes);
    return out.n ? row('differs', `${out.n} rows of ${out.from} to ${out.to} lie outside every committed window of their scopes`) : row('held', '');
  } catch (e) {
    if (e instanceof QuotaReachedError) return row('not-checked', e.message);
    throw e;
  }
}

/** The rows of one endpoint's scopes (`mine`) in `bounds` that lie in none of their committed windows: how many, and their blocks. */
async function rowsOutside(
  conn: DuckDBConnection,
  ds: LakeFinding,
  spec: AddressScope,
  mine: readonly ScopeGroup[],
  bounds: { from?: number; to?: number },
): Promise<{ n: number; lo: number; hi: number }> {
  const wins = mine.flatMap((g) => g.units.map((u) => `(${literal(g.template!.scope.address!.toLowerCase())}, ${u.from}, ${u.to})`));
  const addrs = mine.map((g) => literal(g.template!.scope.address!.toLowerCase())).join(', ');
  const cols = spec.columns.map((c) => `lower(r.${ident(c)})`).join(', ');
  const block = `r.${ident(spec.blockColumn)}`;
  const inBounds = (bounds.from === undefined ? '' : ` AND ${block} >= ${bounds.from}`) + (bounds.to === undefined ? '' : ` AND ${block} <= ${bounds.to}`);
  const outside = await rowsOf(
    conn,
    `WITH w(a, f, t) AS (VALUES ${wins.join(', ')})
     SELECT count(*) AS n, min(${block}) AS lo, max(${block}) AS hi FROM ${ident(ds.dataset)} r
     WHERE r.network = ${literal(ds.network)}${endpointFilter(spec, 'r.')} AND list_has_any([${cols}], [${addrs}])${inBounds}
       AND NOT EXISTS (SELECT 1 FROM w WHERE ${block} BETWEEN w.f AND w.t AND list_contains([${cols}], w.a))`,
  );
  return { n: Number(outside[0]!.n), lo: Number(outside[0]!.lo), hi: Number(outside[0]!.hi) };
}

/**
 * An account's own sent transactions number their nonces 0, 1, 2, … with no hole, when the lake holds the
 * account's whole history (its committed windows run from block 0 without a gap).
 */
async function nonceChecks(conn: DuckDBConnection, job: Job, groups: readonly ScopeGroup[]): Promise<VerificationRow[]> {
  const out: VerificationRow[] = [];
  for (const g of groups) {
    const address = g.template?.scope.address;
    const row = {
      network: job.what.network,
      check: 'nonces',
      dataset: g.dataset,
      scope: g.scope,
      fromBlock: null,
      toBlock: null,
      lakeCount: null,
      apiCount: null,
    };
    const whole = g.units.length > 0 && g.units[0]!.from === 0 && consecutiveRuns(g.units).length === 1;
    if (!address || !whole) {
      out.push({
        ...row,
        status: 'not-checked',
        detail: address ? 'the lake does not hold this account’s whole history from block 0' : 'not an account scope',
      });
      continue;
    }
    const to = g.units.at(-1)!.to;
    const r = (
      await rowsOf(
        conn,
        `SELECT count(DISTINCT nonce) AS n, max(nonce) AS hi, count(*) FILTER (WHERE nonce IS NULL) AS nulls FROM transactions
         WHERE network = ${literal(job.what.network)} AND lower(sender) = ${literal(address.toLowerCase())} AND block_number <= ${to}`,
      )
    )[0]!;
    const n = Number(r.n);
    const hi = r.hi === null ? -1 : Number(r.hi);
    const holes = hi + 1 - n;
    out.push({
      ...row,
      fromBlock: 0,
      toBlock: to,
      status: Number(r.nulls) ? 'not-checked' : holes ? 'differs' : 'held',
      lakeCount: n,
      detail: Number(r.nulls) ? 'some sent transactions have no nonce' : holes ? `${holes} nonces below ${hi} are missing` : `nonces 0-${hi}`,
    });
  }
  return out;
}

/** The quota account verify's requests count against (the same as the job's runs). */
export const verifyAccount = (job: Job): string => quotaAccount(job.source.target);
