import type { DuckDBValue } from '@duckdb/node-api';
import type { CommandModule } from 'yargs';
import { lakeStatus, type LakeStatus } from '../../load/read/status.js';
import { CliError } from '../exit-codes.js';
import { renderRows } from '../output.js';
import { openLakeTables } from '../../lake/open.js';
import { resolveLakeTarget, withLakeOptions } from '../lake-target.js';

interface Args {
  lake?: string;
  catalog?: string;
  store?: string;
  format: 'table' | 'json';
  runs: number;
}

const size = (b: number | null): string =>
  b === null
    ? ''
    : b < 1024
      ? `${b} B`
      : b < 1024 ** 2
        ? `${(b / 1024).toFixed(1)} KiB`
        : b < 1024 ** 3
          ? `${(b / 1024 ** 2).toFixed(1)} MiB`
          : `${(b / 1024 ** 3).toFixed(2)} GiB`;

/** A cell cut to `max` characters, its end replaced by an ellipsis. */
const elide = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, Math.max(1, max - 1))}…`);

/** Text columns are cut no narrower than this: a few characters of a run id or an error still tell rows apart. */
const MIN_COLUMN = 8;

function section<T extends object>(title: string, rows: T[], empty: string, width = Infinity): string {
  if (rows.length === 0) return `${title}: ${empty}`;
  const columns = Object.keys(rows[0]!);
  let values = rows.map((r) => columns.map((c) => (r as Record<string, DuckDBValue>)[c] ?? null));
  let table = renderRows(columns, values, 'table');
  // On a terminal, the column with the most to spare gives up characters until the lines fit: a text column down
  // to MIN_COLUMN, a number column only its header (down to its numbers, never cut).
  let headers = columns;
  for (let guard = 0; guard < 64; guard++) {
    const over = Math.max(...table.split('\n').map((l) => l.length)) - width;
    if (over <= 0) break;
    const spare = headers.map((h, i) => {
      const cells = Math.max(0, ...values.map((r) => String(r[i] ?? '').length));
      const numeric = values.some((r) => typeof r[i] === 'number' || typeof r[i] === 'bigint');
      const w = Math.max(h.length, cells);
      const floor = numeric ? Math.max(cells, 3) : MIN_COLUMN;
      return { w, floor, numeric, spare: w - floor };
    });
    const best = spare.reduce((m, x, i) => (x.spare > spare[m]!.spare ? i : m), 0);
    const col = spare[best]!;
    if (col.spare <= 0) break;
    const max = Math.max(col.floor, col.w - over);
    headers = headers.map((h, i) => (i === best ? elide(h, max) : h));
    if (!col.numeric) values = values.map((r) => r.map((v, i) => (i === best && typeof v === 'string' ? elide(v, max) : v)));
    table = renderRows(headers, values, 'table');
  }
  return `${title}:\n${table}`;
}

/**
 * The status as text. `width`: a terminal's columns, to which wide tables are fitted by cutting their widest
 * text cells (Infinity, for a pipe or a file: full lines for scripts).
 */
export function formatStatus(s: LakeStatus, width = Infinity): string {
  const parts = [`lake: ${s.lake}`];
  if (s.pendingCommit) parts.push('pending: a killed run left a decided commit; the next chainlake command that can take the lake finishes it');
  parts.push(
    section(
      'datasets',
      s.datasets.map((d) => ({ ...d, bytes: size(d.bytes) })),
      'none yet (run a job)',
      width,
    ),
  );
  if (s.oldSnapshots.files > 0)
    parts.push(
      `old snapshots: ${s.oldSnapshots.files} file${s.oldSnapshots.files === 1 ? '' : 's'}, ${size(s.oldSnapshots.bytes)}, that only snapshots older than the newest reference (time travel); run \`chainlake maintain\` to free them`,
    );
  if (s.missingFiles.length)
    parts.push(
      section(
        'files the newest snapshot lists that are not on disk (reading their tables fails; something else deleted them)',
        s.missingFiles.map((p) => ({ path: p })),
        '',
        width,
      ),
    );
  if (s.strayPartitions.length)
    parts.push(section('files no snapshot lists (not part of the lake; chainlake catalog rebuild reads them in)', s.strayPartitions, '', width));
  parts.push(section(`last ${s.runs.length} runs`, s.runs, 'none', width));
  parts.push(section('watermarks', s.watermarks, 'none', width));
  parts.push(section('gaps between committed windows', s.gaps, 'none', width));
  if (s.fetchedWindows.length)
    parts.push(
      section(
        'windows fetched and not yet committed (one machine: kept by a run whose commit could not happen, committed by the next run without their requests; distributed: waiting for a worker)',
        s.fetchedWindows,
        '',
        width,
      ),
    );
  if (s.uncoveredFailures.length) parts.push(section('failed windows not yet fetched again', s.uncoveredFailures, '', width));
  return parts.join('\n\n');
}

export const statusCommand: CommandModule<object, Args> = {
  command: 'status',
  describe: 'Show a lake (local, or with --catalog distributed): datasets, last runs, watermarks, and gaps between committed windows',
  builder: (y) =>
    withLakeOptions(y, { distributed: true })
      .option('format', { choices: ['table', 'json'] as const, default: 'table' as const, describe: 'table for a terminal, json for a program' })
      .option('runs', { type: 'number', default: 10, describe: 'How many of the last runs to list' })
      .example('$0 status', 'The state of the lake $CHAINLAKE_LAKE or $CHAINLAKE_CATALOG names, else data/lake')
      .example('$0 status --lake /srv/lake --format json | jq .gaps', 'Gaps as JSON, for monitoring')
      .example(
        '$0 status --catalog postgres://chainlake@db/lake',
        'A distributed lake: its datasets and the runs, windows and watermarks of its control plane',
      ),
  handler: async (args) => {
    if (!Number.isInteger(args.runs) || args.runs < 1) throw new CliError(`--runs must be a positive integer, got ${args.runs}`);
    // The ledger and the catalog's tables only: status reads no dataset's rows.
    const reader = await openLakeTables(resolveLakeTarget(args), { datasets: false });
    try {
      const s = await lakeStatus(reader.conn, reader.lake, { runs: args.runs });
      process.stdout.write(
        (args.format === 'json' ? JSON.stringify(s, null, 2) : formatStatus(s, process.stdout.isTTY ? process.stdout.columns || 80 : Infinity)) + '\n',
      );
    } finally {
      reader.close();
    }
  },
};
