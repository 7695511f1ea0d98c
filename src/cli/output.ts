import type { DuckDBValue } from '@duckdb/node-api';

export type TableFormat = 'table' | 'csv' | 'json';

const cell = (v: DuckDBValue): string => (v === null || v === undefined ? 'NULL' : typeof v === 'string' ? v : String(v));

const csvCell = (v: DuckDBValue): string => {
  if (v === null || v === undefined) return '';
  const s = cell(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};

/** Renders a query result for a terminal (aligned table), a spreadsheet (CSV) or a program (JSON lines). */
export function renderRows(columns: string[], rows: DuckDBValue[][], format: TableFormat, jsonRows?: Record<string, unknown>[]): string {
  if (format === 'csv') return [columns.map((c) => csvCell(c)).join(','), ...rows.map((r) => r.map(csvCell).join(','))].join('\n');
  if (format === 'json') return (jsonRows ?? []).map((r) => JSON.stringify(r)).join('\n');
  const text = rows.map((r) => r.map(cell));
  const widths = columns.map((c, i) => Math.max(c.length, ...text.map((r) => r[i]!.length)));
  const numeric = columns.map(
    (_, i) =>
      rows.length > 0 && rows.every((r) => r[i] === null || typeof r[i] === 'number' || typeof r[i] === 'bigint' || /^-?\d+(\.\d+)?$/.test(cell(r[i]!))),
  );
  const fmt = (r: string[]): string =>
    r
      .map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join(' | ')
      .trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('-+-');
  const plural = rows.length === 1 ? 'row' : 'rows';
  return [fmt(columns), rule, ...text.map(fmt), `(${rows.length} ${plural})`].join('\n');
}
