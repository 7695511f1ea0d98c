import { DuckDBTypeId, JsonDuckDBValueConverter, type DuckDBResult, type Json } from '@duckdb/node-api';
import type { ByteRing } from '../../load/byte-ring.js';
import { RawColumn, rawWidth, releaseChunk } from '../../load/chunk-columns.js';

/** Integer types DuckDB's JSON conversion gives as text, since they may exceed what a JSON reader keeps exact. */
const WIDE_INTEGERS: ReadonlySet<DuckDBTypeId> = new Set([DuckDBTypeId.BIGINT, DuckDBTypeId.UBIGINT, DuckDBTypeId.HUGEINT, DuckDBTypeId.UHUGEINT]);

const LF = 0x0a;
const decoder = new TextDecoder();

/**
 * The result as JSON lines: each row an object of the node-api's JSON values (`yieldRowObjectJson`'s), made and
 * written into the ring one row at a time rather than a chunk's rows at once, so that none outlives a
 * young-generation collection; VARCHARs are read from DuckDB's buffers, which the node-api's own reading would
 * keep for the whole chunk.
 */
export async function writeJsonRows(result: DuckDBResult, out: ByteRing, closed: () => boolean): Promise<void> {
  const names = result.deduplicatedColumnNames();
  const types = result.columnTypes();
  // BIGINTs as JSON numbers where exact (|v| <= 2^53 - 1, what JavaScript and most readers keep); beyond, the
  // exact text stays a string rather than a number a reader would silently round.
  const wide = types.map((t) => WIDE_INTEGERS.has(t.typeId));
  const rawText = types.map((t) => t.typeId === DuckDBTypeId.VARCHAR && rawWidth(t) !== undefined);
  for (;;) {
    const chunk = await result.fetchChunk();
    if (!chunk || chunk.rowCount === 0) break;
    if (closed()) return;
    const rows = chunk.rowCount;
    const cells = types.map((t, c): ((r: number) => Json) => {
      if (rawText[c]) {
        const col = new RawColumn(chunk, c, rows, rawWidth(t)!);
        return (r) => (col.valid(r) ? decoder.decode(col.bytes(r)) : null);
      }
      const vector = chunk.getColumnVector(c);
      return (r) => JsonDuckDBValueConverter(vector.getItem(r), vector.type, JsonDuckDBValueConverter);
    });
    for (let r = 0; r < rows; r++) {
      const row: Record<string, Json> = {};
      for (let c = 0; c < cells.length; c++) {
        const v = cells[c]!(r);
        row[names[c]!] = wide[c] && typeof v === 'string' && Number.isSafeInteger(Number(v)) ? Number(v) : v;
      }
      out.text(JSON.stringify(row));
      out.byte(LF);
      if (out.full) await out.flush();
    }
    releaseChunk(chunk);
  }
  await out.end();
}
