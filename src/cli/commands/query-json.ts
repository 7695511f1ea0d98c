import type { DuckDBResult } from '@duckdb/node-api';
import { DuckDBTypeId, JsonDuckDBValueConverter } from '../../ducklake/node-api.js';
import type { ByteRing } from '../../load/read/byte-ring.js';
import { RawColumn, rawWidth, releaseChunk } from '../../load/read/chunk-columns.js';

/** Integer types DuckDB's JSON conversion gives as text: written as JSON numbers with every digit. */
const WIDE_INTEGERS: ReadonlySet<DuckDBTypeId> = new Set([DuckDBTypeId.BIGINT, DuckDBTypeId.UBIGINT, DuckDBTypeId.HUGEINT, DuckDBTypeId.UHUGEINT]);

const LF = 0x0a;
const decoder = new TextDecoder();

/** How a column's value becomes JSON text. */
type Cell = (r: number) => string;

/**
 * The result as JSON lines: each row an object, written into the ring one row at a time rather than a chunk's
 * rows at once, so that none outlives a young-generation collection; VARCHARs are read from DuckDB's buffers,
 * which the node-api's own reading would keep for the whole chunk. Each column has one JSON type in every row
 * (a program reading the lines relies on it): integers are numbers with every digit, however large (exact in
 * jq, Python and DuckDB; a JavaScript reader that needs digits beyond 2^53 casts the column to VARCHAR in its
 * SQL); JSON columns (`extra`) are nested as the JSON they hold, not as a string of it.
 */
export async function writeJsonRows(result: DuckDBResult, out: ByteRing, closed: () => boolean): Promise<void> {
  const names = result.deduplicatedColumnNames();
  const types = result.columnTypes();
  const keys = names.map((n, c) => `${c === 0 ? '{' : ','}${JSON.stringify(n)}:`);
  const wide = types.map((t) => WIDE_INTEGERS.has(t.typeId));
  const json = types.map((t) => t.typeId === DuckDBTypeId.VARCHAR && t.alias === 'JSON');
  const rawText = types.map((t) => t.typeId === DuckDBTypeId.VARCHAR && rawWidth(t) !== undefined);
  for (;;) {
    const chunk = await result.fetchChunk();
    if (!chunk || chunk.rowCount === 0) break;
    if (closed()) return;
    const rows = chunk.rowCount;
    const cells = types.map((t, c): Cell => {
      if (rawText[c]) {
        const col = new RawColumn(chunk, c, rows, rawWidth(t)!);
        const asIs = json[c];
        return (r) => {
          if (!col.valid(r)) return 'null';
          const text = decoder.decode(col.bytes(r));
          return asIs ? text : JSON.stringify(text);
        };
      }
      const vector = chunk.getColumnVector(c);
      if (json[c]) return (r) => String(vector.getItem(r) ?? 'null');
      if (wide[c]) return (r) => String(JsonDuckDBValueConverter(vector.getItem(r), vector.type, JsonDuckDBValueConverter));
      return (r) => JSON.stringify(JsonDuckDBValueConverter(vector.getItem(r), vector.type, JsonDuckDBValueConverter));
    });
    for (let r = 0; r < rows; r++) {
      let line = '';
      for (let c = 0; c < cells.length; c++) line += keys[c]! + cells[c]!(r);
      out.text(cells.length ? `${line}}` : '{}');
      out.byte(LF);
      if (out.full) await out.flush();
    }
    releaseChunk(chunk);
  }
  await out.end();
}
