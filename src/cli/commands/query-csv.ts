import {
  DuckDBDateValue,
  DuckDBDecimalValue,
  DuckDBTimestampTZValue,
  DuckDBTimestampValue,
  DuckDBTypeId,
  type DuckDBDataChunk,
  type DuckDBResult,
  type DuckDBType,
  type DuckDBValue,
} from '@duckdb/node-api';
import type { ByteRing } from '../../load/read/byte-ring.js';
import { RawColumn, rawWidth, releaseChunk } from '../../load/read/chunk-columns.js';

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
  const text = (s: string): void => out.text(NEEDS_QUOTES.test(s) ? csvText(s) : s);
  if (width !== undefined) {
    const col = new RawColumn(chunk, c, rows, width);
    const numbers = <T extends { [i: number]: number | bigint }>(items: T): CellWriter => {
      return (r) => {
        if (col.valid(r)) out.text(String(items[r]));
      };
    };
    switch (t.typeId) {
      case DuckDBTypeId.BOOLEAN:
        return (r) => {
          if (col.valid(r)) out.text(col.data[r * width] !== 0 ? 'true' : 'false');
        };
      case DuckDBTypeId.TINYINT:
        return numbers(col.view(Int8Array));
      case DuckDBTypeId.SMALLINT:
        return numbers(col.view(Int16Array));
      case DuckDBTypeId.INTEGER:
        return numbers(col.view(Int32Array));
      case DuckDBTypeId.BIGINT:
        return numbers(col.view(BigInt64Array));
      case DuckDBTypeId.UTINYINT:
        return numbers(col.view(Uint8Array));
      case DuckDBTypeId.USMALLINT:
        return numbers(col.view(Uint16Array));
      case DuckDBTypeId.UINTEGER:
        return numbers(col.view(Uint32Array));
      case DuckDBTypeId.UBIGINT:
        return numbers(col.view(BigUint64Array));
      case DuckDBTypeId.FLOAT:
        return numbers(col.view(Float32Array));
      case DuckDBTypeId.DOUBLE:
        return numbers(col.view(Float64Array));
      case DuckDBTypeId.DATE: {
        const days = col.view(Int32Array);
        return (r) => {
          if (col.valid(r)) text(new DuckDBDateValue(days[r]!).toString());
        };
      }
      case DuckDBTypeId.TIMESTAMP: {
        const micros = col.view(BigInt64Array);
        return (r) => {
          if (col.valid(r)) text(new DuckDBTimestampValue(micros[r]!).toString());
        };
      }
      case DuckDBTypeId.TIMESTAMP_TZ: {
        const micros = col.view(BigInt64Array);
        return (r) => {
          if (col.valid(r)) text(new DuckDBTimestampTZValue(micros[r]!).toString());
        };
      }
      case DuckDBTypeId.DECIMAL: {
        const scaled = decimalValues(col, width);
        return (r) => {
          if (col.valid(r)) text(new DuckDBDecimalValue(scaled(r), t.width, t.scale).toString());
        };
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
  }
  const vector = chunk.getColumnVector(c);
  return (r) => {
    const v = vector.getItem(r);
    if (v !== null && v !== undefined) text(typeof v === 'string' ? v : String(v));
  };
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
