import { columnSource, rawCompanion, type ColumnDef, type SourceKind } from '../datasets/column.js';
import type { DatasetDef, EndpointDef, EntryFields, Network } from '../datasets/dataset.js';
import { ACCEPTED, REFUSED, Rejected, fitsDecimal38, type Acceptor, type ByteAcceptor, type Canonical, type Converter } from './convert.js';
import { KINDS } from './kinds.js';
import type { RawPage } from '../extract/pager.js';
import { extraText } from './exact-extra.js';
import { ABSENT, ESCAPED, NULL, STRING, scanList } from '../extract/scan.js';
import { ChainlakeError, bugError } from '../errors.js';

/** A typed row ready for staging: column name -> canonical value, plus the partition value. */
export interface StagedRow {
  values: Record<string, Canonical>;
  /** `YYYY-MM-DD`: the UTC date that names the row's partition. */
  partition: string;
}

/** A row that could not be converted. Nothing is dropped: the whole API entry is kept as JSON. */
export interface RejectRecord {
  dataset: string;
  network: Network;
  window: string;
  field: string;
  raw_value: string | null;
  reason: string;
  entry: string;
}

export interface TransformContext {
  network: Network;
  /** UTC date of the run, the partition of snapshot datasets. */
  snapshotDate: string;
  /** false: no page is staged as received, every entry goes through the converters (default true). */
  stageReceived?: boolean;
}

/** Where a page's entries came from: values a column can read with a `$scope.`, `$results.` or `$meta.` source. */
export interface PageContext {
  scope: Record<string, string>;
  /** The envelope's results object (fields beside `data`, such as token_name of an inventory). */
  results: Record<string, unknown>;
  /** The endpoint's constants and facts about the call (`endpoint`, `found`, `api_message`). */
  meta?: Record<string, unknown>;
  /** Offset of the page within its part: 0 starts a part (a fresh listing), which restarts ordinal numbering. */
  offset?: number;
  /** The endpoint's mapping of its entries onto the dataset's fields. */
  fields?: EntryFields;
  /** Per-window numbering state of datasets with an ordinal; one per window, pages in listing order. */
  ordinals?: OrdinalState;
  /** The page's body as received, when its entries are that body's list. */
  raw?: RawPage;
  /** A page cut short: the body its entries are the first ones of (see FetchedPage.cutFrom). */
  cutFrom?: RawPage;
}

/** Pages up to this size may be staged as received: within DuckDB's default JSON object size (16 MB). */
export const MAX_RECEIVED_PAGE_BYTES = 8 * 1024 * 1024;

/**
 * A page whose entries all passed as received (see `RowTransformer.acceptRaw`): its body is staged as is and
 * DuckDB types the entries; what the entries do not carry rides beside it.
 */
export interface AcceptedPage {
  rows: number;
  /** Staged values of the columns read from the scope, the results or the call's meta: the same for every entry. */
  constants: Record<string, Canonical>;
  /** The partition of every row, for snapshot datasets; otherwise each row's comes from its timestamp. */
  partition: string | null;
  /** Ordinal of each entry in listing order, for datasets with an ordinal. */
  ordinals?: number[];
  /** The `extra` JSON text of each entry (NULL where none), when any entry of the page carries unread fields. */
  extras?: (string | null)[];
  /**
   * Whether a hex value of the page may have upper-case digits that staging does not lower-case (entries
   * accepted as parsed objects, or strings with escapes): its staged file's hex columns are lower-cased in SQL
   * when typed only then.
   */
  upperCaseHex: boolean;
  /**
   * Where the body's hex values with upper-case digits are (byte offsets, start and end in turn), for
   * staging to lower-case them as it writes the page (load/write/staging.ts), so that DuckDB need not.
   */
  upperCaseSpans?: Int32Array;
}

/**
 * Ordinal numbering of one window. Identical entries (equal `over` values) of one group (transaction) get
 * 0, 1, 2... Only the current group is remembered: the listing must keep a group's entries together, which is
 * checked by requiring the group keys to be monotonic; a violation throws (the window fails loudly) instead of
 * numbering a group twice and letting the merge collapse distinct rows.
 */
export class OrdinalState {
  private groupKey: (string | number)[] | undefined;
  private direction = 0;
  private counts = new Map<string, number>();
  /** The identity of the group's first entry, not yet computed (most groups hold one entry): how, and of which. */
  private firstIdentity: ((entry: number) => string) | undefined;
  private firstEntry = 0;

  /** A new part of the window (offset 0): its listing starts over. */
  restart(): void {
    this.groupKey = undefined;
    this.direction = 0;
    this.counts.clear();
    this.firstIdentity = undefined;
  }

  /**
   * The ordinal of the next entry: how many entries of its group (equal group keys, as JSON) came before it
   * with the same identity. `identity(entry)` is asked for only when the group holds more than one entry; it
   * takes the entry's index so that a page's entries share one function rather than a closure each.
   */
  next(groupKey: (string | number)[], identity: (entry: number) => string, entry = 0): number {
    if (!this.groupKey || !sameKey(groupKey, this.groupKey)) {
      if (this.groupKey) {
        const d = compareKeys(groupKey, this.groupKey);
        if (this.direction === 0) this.direction = d;
        else if (d !== this.direction) {
          throw new OrdinalOrderError(
            `entries are not listed group by group (${JSON.stringify(this.groupKey)} then ${JSON.stringify(groupKey)}): ordinals would not be stable, so the window is refused`,
          );
        }
      }
      this.groupKey = groupKey;
      this.counts.clear();
      // The first of its group: ordinal 0 whatever its identity, which waits until a second entry comes.
      this.firstIdentity = identity;
      this.firstEntry = entry;
      return 0;
    }
    if (this.firstIdentity) {
      this.counts.set(this.firstIdentity(this.firstEntry), 1);
      this.firstIdentity = undefined;
    }
    const id = identity(entry);
    const n = this.counts.get(id) ?? 0;
    this.counts.set(id, n + 1);
    return n;
  }
}

/** Whether two group keys are equal as JSON (strings compare as themselves, other values by their JSON text). */
function sameKey(a: readonly unknown[], b: readonly unknown[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i],
      y = b[i];
    if (x === y && typeof x === 'string') continue;
    if (typeof x === 'string' && typeof y === 'string') return false;
    if (JSON.stringify([x]) !== JSON.stringify([y])) return false;
  }
  return true;
}

export class OrdinalOrderError extends ChainlakeError {
  constructor(message: string) {
    super(message);
  }
}

/** Group keys compare numerically where both sides are integers (block numbers, indexes), else as text. */
function compareKeys(a: (string | number)[], b: (string | number)[]): number {
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!,
      y = b[i]!;
    if (x === y) continue;
    const nx = typeof x === 'string' && /^-?\d+$/.test(x) ? integerOf(x) : undefined;
    const ny = typeof y === 'string' && /^-?\d+$/.test(y) ? integerOf(y) : undefined;
    if (nx !== undefined && ny !== undefined) return nx < ny ? -1 : nx > ny ? 1 : 0;
    return String(x) < String(y) ? -1 : 1;
  }
  return 0;
}

/** An integer's text as a number while exact (up to 15 digits), else as a bigint; either compares exactly. */
const integerOf = (text: string): number | bigint => (text.length <= 15 ? Number(text) : BigInt(text));

export interface TransformResult {
  rows: StagedRow[];
  rejects: RejectRecord[];
}

interface CompiledColumn {
  def: ColumnDef;
  /** Where the value is read: the entry itself, the window's scope, the page's results, the call's meta, or the ordinal. */
  from: SourceKind;
  path: string[];
  convert: Converter;
  /** Whether a value may be staged as received; undefined when this kind never is. */
  accept: Acceptor | undefined;
  /** `accept` on the bytes of a string without escapes. */
  acceptBytes: ByteAcceptor | undefined;
  /** The canonical value of a value `accept` passed (what `convert` would give). */
  canonical: ((raw: unknown) => Canonical) | undefined;
  isAmount: boolean;
  raw: string;
}

/** Known field names as a tree, so unknown fields are found at any depth the declaration reaches. */
type FieldTree = Map<string, FieldTree | null>;

function buildFieldTree(columns: CompiledColumn[]): FieldTree {
  const root: FieldTree = new Map();
  for (const c of columns) {
    let node = root;
    c.path.forEach((part, i) => {
      if (i === c.path.length - 1) {
        if (!node.has(part)) node.set(part, null);
      } else {
        let child = node.get(part);
        if (!child) {
          child = new Map();
          node.set(part, child);
        }
        node = child;
      }
    });
  }
  return root;
}

/** The entry as the dataset names its fields: renamed fields, and absent ones filled from the scope or results. */
function mapEntry(entry: Record<string, unknown>, fields: EntryFields, page: PageContext): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const rename = fields.rename ?? {};
  for (const key in entry) out[rename[key] ?? key] = entry[key];
  for (const [field, source] of Object.entries(fields.fill ?? {})) {
    if (out[field] !== undefined) continue;
    const [root, ...path] = source.split('.');
    let v: unknown = root === '$scope' ? page.scope : root === '$results' ? page.results : undefined;
    if (v === undefined) throw bugError(`entry field fill '${field}': source ${source} must start with $scope. or $results.`);
    for (const part of path) v = v === null || typeof v !== 'object' ? undefined : (v as Record<string, unknown>)[part];
    out[field] = v;
  }
  return out;
}

const rawText = (raw: unknown): string | null => (raw === undefined || raw === null ? null : typeof raw === 'string' ? raw : JSON.stringify(raw));

/**
 * Turns API entries into typed rows per a dataset declaration. Compiled once per dataset and run; the hot
 * loop does one converter call per cell and no per-row allocation beyond the row itself.
 */
export class RowTransformer {
  private readonly columns: CompiledColumn[];
  private readonly fields: FieldTree;
  private readonly partitionColumn: string | undefined;
  private readonly ordinal: { over: CompiledColumn[]; groupBy: CompiledColumn[]; column: string } | undefined;
  /** Unknown field paths seen so far, with how many entries carried them. */
  readonly unknownFields = new Map<string, number>();
  /** Whether every entry column has an acceptor, so that pages may be staged as received. */
  private readonly rawEligible: boolean;
  /**
   * The top-level keys the entry columns read, to scan a body for repeated keys (see `repeatsNoKey`); undefined
   * when a column reads a nested field, whose objects the scanner does not check.
   */
  private readonly entryKeys: readonly string[] | undefined;
  private readonly entryColumns: CompiledColumn[];
  /** The column that keeps an entry's unread fields (`$extra`), when the dataset has one. */
  private readonly extraColumn: string | undefined;
  /**
   * The entry fields the columns read, when pages may be accepted from a scan of their body (every column
   * reads a top-level field and has a byte acceptor); see `scanFields` and `acceptScanned`.
   */
  private readonly scanned: readonly string[] | undefined;

  constructor(
    private readonly dataset: DatasetDef,
    private readonly ctx: TransformContext,
  ) {
    this.columns = dataset.columns.map((def) => {
      const { from, path } = columnSource(def);
      if (def.pattern && def.kind !== 'text') throw bugError(`dataset ${dataset.name}: column ${def.name}: a pattern applies to text columns only`);
      const kind = KINDS[def.kind];
      return {
        def,
        from,
        path,
        convert: kind.convert,
        accept: kind.received?.accept,
        acceptBytes: kind.received?.acceptBytes,
        canonical: kind.received?.canonical,
        isAmount: def.kind === 'amount',
        raw: rawCompanion(def.name),
      } satisfies CompiledColumn;
    });
    this.fields = buildFieldTree(this.columns.filter((c) => c.from === 'entry'));
    this.partitionColumn = dataset.partition === 'snapshot_date' ? undefined : dataset.partitionFrom;
    if (dataset.partition !== 'snapshot_date') {
      const p = dataset.columns.find((c) => c.name === this.partitionColumn);
      if (!p || p.kind !== 'timestamp' || p.nullable) {
        throw bugError(`dataset ${dataset.name}: a ${dataset.partition} partition needs partitionFrom naming a non-nullable timestamp column`);
      }
    }
    this.entryColumns = this.columns.filter((c) => c.from === 'entry');
    this.extraColumn = this.columns.find((c) => c.from === 'extra')?.def.name;
    this.rawEligible = ctx.stageReceived !== false && this.columns.every((c) => c.from !== 'entry' || c.accept !== undefined);
    // Fields named like a property every object inherits (`constructor`...) read differently from a parsed
    // entry that lacks them: such a dataset is never accepted from a scan.
    const topLevel = this.entryColumns.every((c) => c.path.length === 1 && !(c.path[0]! in Object.prototype) && c.acceptBytes !== undefined);
    const keys = [...new Set(this.entryColumns.map((c) => c.path[0]!))];
    this.entryKeys = this.entryColumns.every((c) => c.path.length === 1) ? keys : undefined;
    this.scanned = this.rawEligible && topLevel ? keys : undefined;
    const ordinalColumns = this.columns.filter((c) => c.from === 'ordinal');
    if (dataset.ordinal) {
      const known = new Set(dataset.columns.map((c) => c.name));
      for (const n of [...dataset.ordinal.over, ...dataset.ordinal.groupBy]) {
        if (!known.has(n)) throw bugError(`dataset ${dataset.name}: ordinal refers to unknown column ${n}`);
      }
      if (ordinalColumns.length !== 1) throw bugError(`dataset ${dataset.name}: an ordinal needs exactly one column with source $ordinal`);
      this.ordinal = {
        over: dataset.ordinal.over.map((n) => this.columns.find((c) => c.def.name === n)!),
        groupBy: dataset.ordinal.groupBy.map((n) => this.columns.find((c) => c.def.name === n)!),
        column: ordinalColumns[0]!.def.name,
      };
    } else if (ordinalColumns.length) {
      throw bugError(`dataset ${dataset.name}: column ${ordinalColumns[0]!.def.name} reads $ordinal but the dataset declares no ordinal`);
    }
  }

  transform(entries: readonly unknown[], window: string, page: PageContext): TransformResult {
    const rows: StagedRow[] = [];
    const rejects: RejectRecord[] = [];
    const ordinals = this.ordinal ? page.ordinals : undefined;
    if (this.ordinal && !ordinals) throw bugError(`dataset ${this.dataset.name}: pages need an OrdinalState (one per window)`);
    if (ordinals && (page.offset ?? 0) === 0) ordinals.restart();
    const meta = page.meta ?? {};
    const mapFields = page.fields && (page.fields.rename || page.fields.fill) ? page.fields : undefined;
    for (let index = 0; index < entries.length; index++) {
      const apiEntry = entries[index];
      if (apiEntry === null || typeof apiEntry !== 'object' || Array.isArray(apiEntry)) {
        rejects.push(this.reject(window, '(entry)', apiEntry, 'entry is not a JSON object'));
        continue;
      }
      const entry = mapFields ? mapEntry(apiEntry as Record<string, unknown>, mapFields, page) : (apiEntry as Record<string, unknown>);
      const extra = this.noteUnknown(entry, this.fields, '');
      const values: Record<string, Canonical> = {};
      // Only set when there are fields to keep: a staged row without the key reads as NULL, at no cost per row.
      if (this.extraColumn && extra !== undefined) values[this.extraColumn] = extraText(extra, bodyOf(page, entries), index);
      let rejected: RejectRecord | undefined;
      for (const c of this.columns) {
        if (c.from === 'ordinal' || c.from === 'extra') continue;
        const raw = valueAt(c.from === 'entry' ? entry : c.from === 'scope' ? page.scope : c.from === 'results' ? page.results : meta, c.path);
        const reason = this.stageValue(c, raw, values);
        if (reason !== undefined) {
          rejected = this.reject(window, c.def.name, apiEntry, reason, raw);
          break;
        }
      }
      if (rejected) {
        rejects.push(rejected);
        continue;
      }
      if (this.ordinal) {
        const valueOf: EntryValue = (_, c) => stagedValue(c, values);
        values[this.ordinal.column] = String(this.nextOrdinal(ordinals!, valueOf, this.identityOf(valueOf), 0));
      }
      const partition = this.partitionColumn ? (values[this.partitionColumn] as string).slice(0, 10) : this.ctx.snapshotDate;
      rows.push({ values, partition });
    }
    return { rows, rejects };
  }

  /**
   * Accepts a page to be staged as received when every entry is an object whose every value passes its
   * column's acceptor (or is an allowed NULL) and the values beside the entries convert. Then DuckDB types
   * the entries from the staged body, and the lake gets exactly what `transform` would have given. Returns
   * undefined, having changed nothing, when the page must go through `transform` instead (any value to
   * convert or reject, renamed or filled fields, no body).
   */
  acceptRaw(entries: readonly unknown[], page: PageContext): AcceptedPage | undefined {
    if (!this.rawEligible || !page.raw || page.raw.entries !== entries) return undefined;
    // DuckDB's JSON reader sizes its buffers by the longest line: a huge page (call data of contract
    // creations, say) goes through the converters, one staged line per row, and the reader stays small.
    if (page.raw.bytes.length > MAX_RECEIVED_PAGE_BYTES) return undefined;
    if (page.fields && (page.fields.rename || page.fields.fill)) return undefined;
    if (!this.repeatsNoKey(page.raw)) return undefined;
    for (const e of entries) {
      if (e === null || typeof e !== 'object' || Array.isArray(e)) return undefined;
      for (const c of this.entryColumns) {
        let v: unknown = e;
        for (let i = 0; i < c.path.length; i++) {
          // A nested field's parents must be objects (or absent) for DuckDB to read the path as a struct.
          if (v === null || v === undefined) break;
          if (typeof v !== 'object' || Array.isArray(v)) return undefined;
          v = (v as Record<string, unknown>)[c.path[i]!];
        }
        if (v === undefined || v === null) {
          if (!c.def.nullable) return undefined;
        } else if (!c.accept!(v)) return undefined;
      }
    }
    return this.accepted(
      entries.length,
      page,
      (i, c) => {
        const v = valueAt(entries[i], c.path);
        return v === undefined || v === null ? null : c.canonical!(v);
      },
      () => {
        let extras: (string | null)[] | undefined;
        entries.forEach((e, i) => {
          const extra = this.noteUnknown(e as Record<string, unknown>, this.fields, '');
          if (extra === undefined) return;
          extras ??= new Array<string | null>(entries.length).fill(null);
          extras[i] = extraText(extra, bodyOf(page, entries), i);
        });
        return this.extraColumn ? extras : undefined;
      },
      true, // parsed entries' hex is not looked at for its case
    );
  }

  /**
   * Whether no object of the body repeats a key, around the list or in an entry. DuckDB's reader refuses an
   * object that repeats one of its struct's fields, where JSON.parse keeps the last value: such a body staged
   * as received failed its whole commit, and every later run that fetched it again. A successful scan of the
   * body proved it (the scanner refuses repeated keys); otherwise the body is scanned for it now. The scanner
   * does not look inside nested values, so an entry column on a nested field sends every page to `transform`.
   */
  private repeatsNoKey(raw: RawPage): boolean {
    if (!this.entryKeys) return false;
    if (raw.list && raw.list.bytes === raw.bytes) return true;
    return scanList(raw.bytes, raw.entriesAt, this.entryKeys) !== undefined;
  }

  /**
   * The entry fields to locate when a body of `endpoint` is scanned (extract/scan.ts), or undefined when its
   * pages are never accepted from a scan: a column reads a nested field, a kind has no byte acceptor, the
   * endpoint renames or fills fields, or a column reads beside the entries where the scan leaves `[]`.
   */
  scanFields(endpoint: EndpointDef): readonly string[] | undefined {
    if (!this.scanned || endpoint.method !== 'GET' || endpoint.entryFields?.rename || endpoint.entryFields?.fill) return undefined;
    if (this.columns.some((c) => c.from === 'results' && c.path[0] === endpoint.entriesAt[0])) return undefined;
    return this.scanned;
  }

  /**
   * `acceptRaw` for a page whose body was scanned (`page.raw.list`), on the values' bytes: the same decision
   * and the same accepted page, without the entries as objects. A string with escapes is decoded and given
   * to the string acceptor; anything else a byte acceptor does not pass returns undefined (having changed
   * nothing), and the caller asks `acceptRaw` of the parsed entries, as if there had been no scan.
   */
  acceptScanned(page: PageContext): AcceptedPage | undefined {
    const list = page.raw?.list;
    const fields = this.scanned;
    if (!list || !fields || !this.rawEligible || list.bytes !== page.raw!.bytes) return undefined;
    if (list.bytes.length > MAX_RECEIVED_PAGE_BYTES) return undefined;
    if (page.fields && (page.fields.rename || page.fields.fill)) return undefined;
    // The unknown keys the scan counted are those beside `fields`: it must have located exactly them.
    if (list.fields.length !== fields.length || fields.some((f) => !list.fields.includes(f))) return undefined;
    // Entries with fields no column reads keep them in `extra`: their values are read from the parsed entries.
    if (this.extraColumn && list.unknown.length > 0) return undefined;
    const columns = this.entryColumns;
    const at = columns.map((c) => list.fields.indexOf(c.path[0]!));
    const { tags, spans, bytes, count } = list;
    const nf = list.fields.length;
    let escaped = false;
    let upper = 0;
    for (let i = 0; i < count; i++) {
      const base = i * nf;
      for (let j = 0; j < columns.length; j++) {
        const c = columns[j]!;
        const slot = base + at[j]!;
        const tag = tags[slot];
        if (tag === STRING) {
          const from = spans[2 * slot]!;
          const to = spans[2 * slot + 1]!;
          const said = c.acceptBytes!(bytes, from, to);
          if (said === REFUSED) return undefined;
          if (said !== ACCEPTED) {
            if (upper + 2 > spanScratch.length) spanScratch = growSpans(spanScratch, upper + 2);
            spanScratch[upper++] = from;
            spanScratch[upper++] = to;
          }
        } else if (tag === ABSENT || tag === NULL) {
          if (!c.def.nullable) return undefined;
        } else if (tag === ESCAPED) {
          if (!c.accept!(list.value(i, at[j]!))) return undefined;
          escaped = true; // not looked at byte by byte: it may have upper-case hex
        } else return undefined; // not a string: no acceptor passes it
      }
    }
    const atField = new Map(columns.map((c, j) => [c, at[j]!]));
    return this.accepted(
      count,
      page,
      (i, c) => {
        const f = atField.get(c)!;
        return list.tag(i, f) === ABSENT || list.tag(i, f) === NULL ? null : c.canonical!(list.value(i, f) as string);
      },
      () => {
        for (const u of list.unknown) this.unknownFields.set(u.name, (this.unknownFields.get(u.name) ?? 0) + u.entries);
        return undefined;
      },
      escaped,
      upper > 0 ? spanScratch.slice(0, upper) : undefined,
    );
  }

  /**
   * The end of `acceptRaw` and `acceptScanned`, once every entry value passed: the values beside the entries,
   * then (only if those convert) the ordinals and the unknown fields. `entryValue(i, c)` is the canonical value
   * of entry column `c` in entry `i`.
   */
  private accepted(
    rows: number,
    page: PageContext,
    entryValue: (i: number, c: CompiledColumn) => Canonical,
    noteUnknown: () => (string | null)[] | undefined,
    upperCaseHex: boolean,
    upperCaseSpans?: Int32Array,
  ): AcceptedPage | undefined {
    const constants: Record<string, Canonical> = {};
    const meta = page.meta ?? {};
    for (const c of this.columns) {
      if (c.from === 'entry' || c.from === 'ordinal' || c.from === 'extra') continue;
      if (this.stageValue(c, valueAt(c.from === 'scope' ? page.scope : c.from === 'results' ? page.results : meta, c.path), constants) !== undefined)
        return undefined;
    }
    // Accepted: only now touch the per-window and per-run state.
    let ordinals: number[] | undefined;
    if (this.ordinal) {
      const state = page.ordinals;
      if (!state) throw bugError(`dataset ${this.dataset.name}: pages need an OrdinalState (one per window)`);
      if ((page.offset ?? 0) === 0) state.restart();
      ordinals = new Array<number>(rows);
      const valueOf: EntryValue = (i, c) => (c.from === 'entry' ? entryValue(i, c) : stagedValue(c, constants));
      const identity = this.identityOf(valueOf);
      for (let i = 0; i < rows; i++) ordinals[i] = this.nextOrdinal(state, valueOf, identity, i);
    }
    const extras = noteUnknown();
    return {
      rows,
      constants,
      partition: this.partitionColumn ? null : this.ctx.snapshotDate,
      ordinals,
      ...(extras ? { extras } : {}),
      upperCaseHex,
      ...(upperCaseSpans ? { upperCaseSpans } : {}),
    };
  }

  /**
   * Converts one value into the staged values of its column (an amount fills its `_raw` companion too).
   * Returns why the value cannot be staged (the row is a reject), or undefined.
   */
  private stageValue(c: CompiledColumn, raw: unknown, values: Record<string, Canonical>): string | undefined {
    if (raw === undefined || raw === null) {
      if (!c.def.nullable) return `required field ${c.path.join('.')} is ${raw === null ? 'null' : 'missing'}`;
      values[c.def.name] = null;
      if (c.isAmount) values[c.raw] = null;
      return undefined;
    }
    const v = c.convert(raw);
    if (v instanceof Rejected) return v.reason;
    if (c.def.pattern && !c.def.pattern.test(v as string)) return `does not match ${c.def.pattern}: ${JSON.stringify(v).slice(0, 80)}`;
    if (c.isAmount) {
      const fits = fitsDecimal38(v as string);
      values[c.def.name] = fits ? v : null;
      values[c.raw] = fits ? null : v;
    } else values[c.def.name] = v;
    return undefined;
  }

  /**
   * The ordinal of entry `entry`, whose canonical column values `valueOf(entry, column)` gives. One `valueOf` serves
   * a page's entries: a closure per entry (and per group key and identity) was a fifth of a run's allocations.
   */
  private nextOrdinal(state: OrdinalState, valueOf: EntryValue, identity: (entry: number) => string, entry: number): number {
    const groupBy = this.ordinal!.groupBy;
    const groupKey = new Array<string | number>(groupBy.length);
    for (let j = 0; j < groupBy.length; j++) groupKey[j] = valueOf(entry, groupBy[j]!) as string | number;
    return state.next(groupKey, identity, entry);
  }

  /** An entry's identity among its group's entries (its `over` values as JSON), for OrdinalState.next. */
  private identityOf(valueOf: EntryValue): (entry: number) => string {
    const over = this.ordinal!.over;
    return (entry) => JSON.stringify(over.map((c) => valueOf(entry, c)));
  }

  /**
   * Counts the fields of `obj` no column reads, at any depth the declaration reaches, and returns them as an
   * object of the same shape (values as received), or undefined when there are none: the entry's `extra`.
   */
  private noteUnknown(obj: Record<string, unknown>, tree: FieldTree, prefix: string): Record<string, unknown> | undefined {
    let extra: Record<string, unknown> | undefined;
    for (const key in obj) {
      const known = tree.get(key);
      if (known === undefined) {
        const path = prefix + key;
        this.unknownFields.set(path, (this.unknownFields.get(path) ?? 0) + 1);
        (extra ??= {})[key] = obj[key];
      } else if (known !== null) {
        const child = obj[key];
        if (child !== null && typeof child === 'object' && !Array.isArray(child)) {
          const inner = this.noteUnknown(child as Record<string, unknown>, known, `${prefix}${key}.`);
          if (inner) (extra ??= {})[key] = inner;
        }
      }
    }
    return extra;
  }

  private reject(window: string, field: string, entry: unknown, reason: string, raw?: unknown): RejectRecord {
    return {
      dataset: this.dataset.name,
      network: this.ctx.network,
      window,
      field,
      raw_value: rawText(raw),
      reason,
      entry: JSON.stringify(entry) ?? 'undefined',
    };
  }
}

/**
 * The upper-case spans of the page being accepted, reused from page to page: a page's spans are copied out at
 * its end in one typed array, where a growing array of numbers per page was an eighth of a run's allocations.
 */
let spanScratch: Int32Array = new Int32Array(4096);

function growSpans(old: Int32Array, needed: number): Int32Array {
  const grown = new Int32Array(Math.max(needed, old.length * 2));
  grown.set(old);
  return grown;
}

/** The canonical value of column `c` in entry `entry` of a page. */
type EntryValue = (entry: number, c: CompiledColumn) => Canonical;

/** A column's canonical value among staged values: an amount too big for DECIMAL sits in its `_raw` companion. */
const stagedValue = (c: CompiledColumn, values: Record<string, Canonical>): Canonical =>
  (c.isAmount ? (values[c.def.name] ?? values[c.raw]) : values[c.def.name]) ?? null;

/** The value at `path` below `root`; undefined where a step is not an object. */
function valueAt(root: unknown, path: readonly string[]): unknown {
  let v = root;
  for (const part of path) v = v === null || typeof v !== 'object' ? undefined : (v as Record<string, unknown>)[part];
  return v;
}

/**
 * The body as received whose list starts with `entries` (the page's own, or the one a cut page came from), for
 * reading their values' digits as sent (see extraText); undefined when there is none.
 */
function bodyOf(page: PageContext, entries: readonly unknown[]): RawPage | undefined {
  if (page.raw?.entries === entries) return page.raw;
  const from = page.cutFrom;
  return from && entries.length <= from.entries.length && (entries.length === 0 || from.entries[0] === entries[0]) ? from : undefined;
}
