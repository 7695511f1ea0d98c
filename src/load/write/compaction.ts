/**
 * `chainlake compact` on either kind of lake: which partitions it rewrites, read from the lake's state
 * (readLakeState) the same way on both, and what it reports and records in the ledger. Each kind commits the
 * rewritten partitions through its own protocol: load/write/maintenance.ts on one machine (journaled batches under
 * the lake's lock), distributed/maintain.ts as one snapshot under the committer lease.
 */
import type { Network } from '../../datasets/dataset.js';
import { ChainlakeError } from '../../errors.js';
import type { RunRecord } from '../ledger/runs.js';
import type { TableShape } from '../schema.js';
import type { LakeState } from './lake-state.js';

/** What a compaction did, on either kind of lake. */
export interface CompactReport {
  runId: string;
  /** The newest snapshot the compaction wrote; null when every partition was already compact (nothing written). */
  snapshotId: number | null;
  /** Partitions rewritten. */
  partitions: number;
  filesBefore: number;
  filesAfter: number;
  rowsBefore: number;
  rowsAfter: number;
  bytesBefore: number;
  bytesAfter: number;
  /**
   * Partitions left as they were: one data file with nothing deleted or inlined into the catalog, which is how every
   * commit writes a partition it touches (rewriting it would only add a copy for older snapshots to hold).
   */
  alreadyCompact: number;
  /** Empty partition folders removed (a lake on this machine's disk; none on a distributed one). */
  prunedDirs: number;
}

export function emptyCompactReport(runId: string): CompactReport {
  return {
    runId,
    snapshotId: null,
    partitions: 0,
    filesBefore: 0,
    filesAfter: 0,
    rowsBefore: 0,
    rowsAfter: 0,
    bytesBefore: 0,
    bytesAfter: 0,
    alreadyCompact: 0,
    prunedDirs: 0,
  };
}

/**
 * The tables a compaction covers: all the lake's (`shapes`: the registry's datasets, `_rejects` and the declared
 * tables), or those `only` names; a name the lake does not know is a usage error that lists the ones it does.
 */
export function compactedShapes(shapes: readonly TableShape[], only?: readonly string[]): TableShape[] {
  if (!only) return [...shapes];
  const unknown = only.filter((name) => !shapes.some((s) => s.name === name));
  if (unknown.length > 0) {
    throw new ChainlakeError(`--dataset ${unknown.join(', ')}: not a table of this lake`, {
      code: 'CHAINLAKE_USAGE',
      hint: `its tables: ${shapes.map((s) => s.name).join(', ')}`,
    });
  }
  return shapes.filter((s) => only.includes(s.name));
}

/** A partition a compaction rewrites, and what it holds now. */
export interface CompactionTarget {
  shape: TableShape;
  network: Network;
  value: string;
  /** Its data files now. */
  files: number;
  bytes: number;
  /**
   * Its rows now; undefined where another DuckLake writer left some of them in the catalog (inlined, deleted) and the
   * state did not write them out (a PostgreSQL catalog): its files' counts are not its rows then.
   */
  rows?: number;
}

/**
 * The partitions of `shapes`' tables that are not compact: several data files, or rows another DuckLake writer left
 * in the catalog (inlined rows, deletes), a partition of inlined rows only included. Sorted by table (as `shapes`
 * lists them), network and partition value.
 */
export function compactionTargets(lake: LakeState, shapes: readonly TableShape[]): { targets: CompactionTarget[]; alreadyCompact: number } {
  const targets: CompactionTarget[] = [];
  let alreadyCompact = 0;
  for (const shape of shapes) {
    if (!lake.has(shape.name)) continue;
    const table = lake.table(shape.name);
    const keys = [...new Set([...table.partitions.keys(), ...(table.unmerged ?? [])])].sort();
    for (const key of keys) {
      const files = table.partitions.get(key) ?? [];
      const unmerged = table.unmerged?.has(key) === true;
      const materialised = files.find((f) => f.materialised);
      if (files.length === 1 && !unmerged && !materialised) {
        alreadyCompact++;
        continue;
      }
      const [network, value] = key.split('\u0000') as [Network, string];
      targets.push({
        shape,
        network,
        value,
        files: materialised?.replaced?.files ?? files.length,
        bytes: materialised?.replaced?.bytes ?? files.reduce((n, f) => n + f.bytes, 0),
        ...(unmerged ? {} : { rows: files.reduce((n, f) => n + f.rows, 0) }),
      });
    }
  }
  return { targets, alreadyCompact };
}

/** Adds what the targets held to the report. */
export function countBefore(report: CompactReport, targets: readonly CompactionTarget[]): void {
  for (const t of targets) {
    report.partitions++;
    report.filesBefore += t.files;
    report.bytesBefore += t.bytes;
    report.rowsBefore += t.rows ?? 0;
  }
}

/**
 * A compaction's row in the ledger's `runs` (both kinds of lake): its status word is `compact`, and its report's
 * totals (what `status` and `report` list for every run) are the rows it wrote, with no request sent.
 */
export function compactRun(report: CompactReport, startedAt: string): RunRecord {
  const { snapshotId: _snapshot, ...rest } = report;
  const totals = { rows: report.rowsAfter, rejects: 0, requests: 0 };
  return { runId: report.runId, job: '(compact)', startedAt, finishedAt: new Date().toISOString(), status: 'compact', report: { ...rest, totals } };
}
