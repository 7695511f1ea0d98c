import { rawCompanion, type ColumnDef } from '../datasets/column.js';
import type { DatasetDef, Network } from '../datasets/dataset.js';
import { CONVERTERS, Rejected, fitsDecimal38, type Canonical, type Converter } from './convert.js';

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
}

/** Where a page's entries came from: values a column can read with a `$scope.` or `$results.` source. */
export interface PageContext {
  scope: Record<string, string>;
  /** The envelope's results object (fields beside `data`, such as token_name of an inventory). */
  results: Record<string, unknown>;
}

export interface TransformResult {
  rows: StagedRow[];
  rejects: RejectRecord[];
}

interface CompiledColumn {
  def: ColumnDef;
  /** Where the value is read: the entry itself, the window's scope or the page's results. */
  from: 'entry' | 'scope' | 'results';
  path: string[];
  convert: Converter;
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

const rawText = (raw: unknown): string | null => (raw === undefined || raw === null ? null : typeof raw === 'string' ? raw : JSON.stringify(raw));

/**
 * Turns API entries into typed rows per a dataset declaration. Compiled once per dataset and run; the hot
 * loop does one converter call per cell and no per-row allocation beyond the row itself.
 */
export class RowTransformer {
  private readonly columns: CompiledColumn[];
  private readonly fields: FieldTree;
  private readonly partitionColumn: string | undefined;
  /** Unknown field paths seen so far, with how many entries carried them. */
  readonly unknownFields = new Map<string, number>();

  constructor(
    private readonly dataset: DatasetDef,
    private readonly ctx: TransformContext,
  ) {
    this.columns = dataset.columns.map((def) => {
      const source = def.source ?? def.name;
      const from = source.startsWith('$scope.') ? 'scope' : source.startsWith('$results.') ? 'results' : 'entry';
      return {
        def,
        from,
        path: (from === 'entry' ? source : source.slice(source.indexOf('.') + 1)).split('.'),
        convert: CONVERTERS[def.kind],
        isAmount: def.kind === 'amount',
        raw: rawCompanion(def.name),
      } satisfies CompiledColumn;
    });
    this.fields = buildFieldTree(this.columns.filter((c) => c.from === 'entry'));
    this.partitionColumn = dataset.partition === 'block_date' ? dataset.partitionFrom : undefined;
    if (dataset.partition === 'block_date' && !this.partitionColumn) {
      throw new Error(`dataset ${dataset.name}: block_date partition needs partitionFrom`);
    }
  }

  transform(entries: readonly unknown[], window: string, page: PageContext): TransformResult {
    const rows: StagedRow[] = [];
    const rejects: RejectRecord[] = [];
    for (const entry of entries) {
      if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
        rejects.push(this.reject(window, '(entry)', entry, 'entry is not a JSON object'));
        continue;
      }
      this.noteUnknown(entry as Record<string, unknown>, this.fields, '');
      const values: Record<string, Canonical> = {};
      let rejected: RejectRecord | undefined;
      for (const c of this.columns) {
        let raw: unknown = c.from === 'entry' ? entry : c.from === 'scope' ? page.scope : page.results;
        for (const part of c.path) raw = raw === null || typeof raw !== 'object' ? undefined : (raw as Record<string, unknown>)[part];
        if (raw === undefined || raw === null) {
          if (!c.def.nullable) {
            rejected = this.reject(window, c.def.name, entry, `required field ${c.path.join('.')} is ${raw === null ? 'null' : 'missing'}`, raw);
            break;
          }
          values[c.def.name] = null;
          if (c.isAmount) values[c.raw] = null;
          continue;
        }
        const v = c.convert(raw);
        if (v instanceof Rejected) {
          rejected = this.reject(window, c.def.name, entry, v.reason, raw);
          break;
        }
        if (c.isAmount) {
          const text = v as string;
          if (fitsDecimal38(text)) {
            values[c.def.name] = text;
            values[c.raw] = null;
          } else {
            values[c.def.name] = null;
            values[c.raw] = text;
          }
        } else {
          values[c.def.name] = v;
        }
      }
      if (rejected) {
        rejects.push(rejected);
        continue;
      }
      const partition = this.partitionColumn ? (values[this.partitionColumn] as string).slice(0, 10) : this.ctx.snapshotDate;
      rows.push({ values, partition });
    }
    return { rows, rejects };
  }

  private noteUnknown(obj: Record<string, unknown>, tree: FieldTree, prefix: string): void {
    for (const key in obj) {
      const known = tree.get(key);
      if (known === undefined) {
        const path = prefix + key;
        this.unknownFields.set(path, (this.unknownFields.get(path) ?? 0) + 1);
      } else if (known !== null) {
        const child = obj[key];
        if (child !== null && typeof child === 'object' && !Array.isArray(child)) this.noteUnknown(child as Record<string, unknown>, known, `${prefix}${key}.`);
      }
    }
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
