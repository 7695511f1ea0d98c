import type { DuckDBDataChunk, DuckDBResult, DuckDBType, DuckDBValue } from '@duckdb/node-api';
import { DuckDBDateValue, DuckDBDecimalValue, DuckDBTimestampTZValue, DuckDBTimestampValue, DuckDBTypeId } from '../../ducklake/node-api.js';
import type { ByteRing } from '../../load/read/byte-ring.js';
import { NUMBER_ARRAYS, RawColumn, rawWidth, releaseChunk } from '../../load/read/chunk-columns.js';

const NEEDS_QUOTES = /[",\n\r]/;

/** A CSV cell of RFC 4180: quoted where it holds a quote, a comma or a line break. */
export function csvText(s: string): string {
  return NEEDS_QUOTES.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** The cell of a DuckDB value: empty for NULL, else its text (String of the node-api's value). */
export function csvCell(v: DuckDBValue | undefined): string {
  return v === null || v === undefined ? '' : csvText(typeof v === 'string' ? v : String(v));
}

const QUOTE = 0x22;
const COMMA = 0x2c;
const LF = 0x0a;
const CR = 0x0d;
const decoder = new TextDecoder();

/** Appends the cell of row `r` of one column of the current chunk (nothing for NULL). */
type CellWriter = (r: number) => void;

/**
 * The cell writer of a column: read from DuckDB's buffers (chunk-columns.ts) where its type allows, with the
 * same text as String of the node-api's value (made for the cell and dropped at once, where its format is not
 * simply a number's), else from the node-api's values.
 */
function cellWriter(chunk: DuckDBDataChunk, c: number, t: DuckDBType, rows: number, out: ByteRing): CellWriter {
  const width = rawWidth(t);
  const raw = width === undefined ? undefined : rawCellWriter(new RawColumn(chunk, c, rows, width), t, width, out);
  if (raw) return raw;
  const vector = chunk.getColumnVector(c);
  return (r) => {
    const v = vector.getItem(r);
    if (v !== null && v !== undefined) quotedText(out, typeof v === 'string' ? v : String(v));
  };
}

const quotedText = (out: ByteRing, s: string): void => out.text(NEEDS_QUOTES.test(s) ? csvText(s) : s);

/** The cell writer of a column read from DuckDB's buffers, or undefined for a type read through the node-api's values. */
function rawCellWriter(col: RawColumn, t: DuckDBType, width: number, out: ByteRing): CellWriter | undefined {
  const numberView = NUMBER_ARRAYS[t.typeId];
  if (numberView) {
    const items = col.view(numberView);
    return (r) => {
      if (col.valid(r)) out.text(String(items[r]));
    };
  }
  /** A cell made from a value of the node-api's (its toString), for types whose text is not a number's. */
  const valueText = (value: (r: number) => { toString(): string }): CellWriter => {
    return (r) => {
      if (col.valid(r)) quotedText(out, value(r).toString());
    };
  };
  switch (t.typeId) {
    case DuckDBTypeId.BOOLEAN:
      return (r) => {
        if (col.valid(r)) out.text(col.data[r * width] !== 0 ? 'true' : 'false');
      };
    case DuckDBTypeId.DATE: {
      const days = col.view(Int32Array);
      return valueText((r) => new DuckDBDateValue(days[r]!));
    }
    case DuckDBTypeId.TIMESTAMP: {
      const micros = col.view(BigInt64Array);
      return valueText((r) => new DuckDBTimestampValue(micros[r]!));
    }
    case DuckDBTypeId.TIMESTAMP_TZ: {
      const micros = col.view(BigInt64Array);
      return valueText((r) => new DuckDBTimestampTZValue(micros[r]!));
    }
    case DuckDBTypeId.DECIMAL: {
      const scaled = decimalValues(col, width);
      return valueText((r) => new DuckDBDecimalValue(scaled(r), t.width, t.scale));
    }
    case DuckDBTypeId.VARCHAR:
      return (r) => {
        if (!col.valid(r)) return;
        const b = col.bytes(r);
        // The UTF-8 bytes of a quote, comma or line break appear only as those characters.
        for (let i = 0; i < b.length; i++) {
          const x = b[i]!;
          if (x === QUOTE || x === COMMA || x === LF || x === CR) return out.text(csvText(decoder.decode(b)));
        }
        out.bytes(b);
      };
  }
  return undefined;
}

/** A DECIMAL's scaled values, as the node-api reads them (its 128-bit ones: the high half signed, the low not). */
function decimalValues(col: RawColumn, width: number): (r: number) => bigint {
  if (width === 2) {
    const v = col.view(Int16Array);
    return (r) => BigInt(v[r]!);
  }
  if (width === 4) {
    const v = col.view(Int32Array);
    return (r) => BigInt(v[r]!);
  }
  if (width === 8) {
    const v = col.view(BigInt64Array);
    return (r) => v[r]!;
  }
  const lo = col.view(BigUint64Array);
  const hi = col.view(BigInt64Array);
  return (r) => (hi[2 * r + 1]! << 64n) + lo[2 * r]!;
}

/**
 * The result as CSV (RFC 4180, a header line, `\n` line ends), chunk by chunk into `out`: a row's cells are
 * written into the ring's buffer as they are read, so no row, line or chunk of text is held.
 */
export async function writeCsvRows(result: DuckDBResult, out: ByteRing, closed: () => boolean): Promise<void> {
  const types = result.columnTypes();
  out.text(result.columnNames().map(csvCell).join(',') + '\n');
  for (;;) {
    const chunk = await result.fetchChunk();
    if (!chunk || chunk.rowCount === 0) break;
    if (closed()) return;
    const rows = chunk.rowCount;
    const cells = types.map((t, c) => cellWriter(chunk, c, t, rows, out));
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cells.length; c++) {
        if (c > 0) out.byte(COMMA);
        cells[c]!(r);
      }
      out.byte(LF);
      if (out.full) await out.flush();
    }
    releaseChunk(chunk);
  }
  await out.end();
}
