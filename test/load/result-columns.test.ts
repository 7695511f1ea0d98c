import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { AsyncByteQueue, RecordBatchStreamWriter, tableFromIPC, type RecordBatch } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csvCell, writeCsvRows } from '../../src/cli/commands/query-csv.js';
import { writeJsonRows } from '../../src/cli/commands/query-json.js';
import { DEFAULT_BATCH_ROWS, recordBatches } from '../../src/load/read/arrow.js';
import { writeArrowStream } from '../../src/load/read/arrow-ipc.js';
import { ByteRing } from '../../src/load/read/byte-ring.js';
import { RawColumn } from '../../src/load/read/chunk-columns.js';

const decoder = new TextDecoder();

/**
 * Query results read from DuckDB's buffers (chunk-columns.ts) for CSV, JSON and Arrow: the same bytes as reading them
 * value by value through the node-api, for every column type, with NULLs, in chunks of uneven sizes.
 */
let instance: DuckDBInstance;
let conn: DuckDBConnection;

beforeAll(async () => {
  instance = await DuckDBInstance.create(':memory:');
  conn = await instance.connect();
});

afterAll(() => {
  conn?.closeSync();
  instance?.closeSync();
});

const nullable = (expr: string, every: number, alias: string): string => `CASE WHEN i % ${every} = 0 THEN NULL ELSE ${expr} END AS ${alias}`;

/**
 * Rows before the filter: every value of `i` (0-4999) more than once, and more than one default record batch
 * (DEFAULT_BATCH_ROWS) after the filter, so that batches, chunks of uneven sizes and the rings all turn over.
 */
const ROWS = 24_000;

/**
 * The text writers' rows: every value of `i` once or twice, in chunks of uneven sizes, 2 MB of CSV and 4 MB of JSON
 * lines: their 4 KB ring still fills hundreds of times (they write DuckDB's chunks, not DEFAULT_BATCH_ROWS batches).
 */
const TEXT_ROWS = 8_000;

/** Every type the writers read raw, each beside NULLs; types read value by value; a filter for chunks of uneven sizes. */
const allTypes = (rows: number) => `SELECT
  ${nullable('(i % 250 - 125)::TINYINT', 5, 'ti')}, ${nullable('(i * 10 - 20000)::SMALLINT', 6, 'si')}, ${nullable('(i * 400003 - 5)::INTEGER', 7, 'ii')},
  ${nullable('(i * 100000000007 - 3)::BIGINT', 3, 'bi')}, ${nullable('(i % 250)::UTINYINT', 5, 'uti')}, ${nullable('(i * 13)::USMALLINT', 6, 'usi')},
  ${nullable('(i * 800003)::UINTEGER', 7, 'ui')}, ${nullable('(i * 18446744073709)::UBIGINT', 8, 'ubi')}, ${nullable('(i / 7.0)::FLOAT', 9, 'f')},
  CASE WHEN i % 13 = 0 THEN 'NaN'::DOUBLE WHEN i % 17 = 0 THEN '-inf'::DOUBLE WHEN i % 19 = 0 THEN NULL ELSE i / 3.0 - 1 END AS d,
  ${nullable('(i % 900 * 1.5 - 700)::DECIMAL(4,1)', 4, 'd4')}, ${nullable('(i * 123.678 - 99)::DECIMAL(9,3)', 5, 'd9')},
  ${nullable('(i * 123456789012.34 - 5)::DECIMAL(18,2)', 6, 'd18')}, ${nullable('(i::HUGEINT * 1000000000000000000000000 - 7)::DECIMAL(38,0)', 2, 'd38')},
  ${nullable('(i * 1.000001 - 3)::DECIMAL(38,10)', 3, 'd38s')}, ${nullable("DATE '1970-01-01' + (i * 37 - 2000)::INTEGER", 4, 'dt')},
  ${nullable("TIMESTAMP '2000-01-01' + to_microseconds(i * 123456789)", 5, 'ts')}, ${nullable("TIMESTAMPTZ '2024-01-01 00:00:00+00' + to_seconds(i * 1000)", 3, 'tz')},
  ${nullable('i % 3 = 0', 7, 'b')}, true AS all_true, NULL::BIGINT AS all_null,
  ${nullable("CASE WHEN i % 4 = 0 THEN 'short' WHEN i % 4 = 1 THEN 'a string longer than twelve bytes ' || i WHEN i % 4 = 2 THEN 'with, comma \"quote\"' || chr(10) || 'line' || chr(13) ELSE 'ünïcødé ✓ ' || i END", 11, 's')},
  ${nullable("('\\x00\\x01ab' || i)::BLOB", 5, 'bl')}, ${nullable('[i, NULL, i + 1]::INTEGER[]', 4, 'l')}, ${nullable('i::HUGEINT * 100000000000000000000', 3, 'h')},
  ${nullable('INTERVAL (i) HOUR', 4, 'iv')}, ${nullable("{'a': i}", 5, 'st')}, ${nullable("('ab12cd34-0000-4000-8000-00000000000' || (i % 10))::UUID", 6, 'uu')}
FROM (SELECT n % 5000 AS i, n FROM range(${rows}) t(n)) WHERE n % 7 <> 3`;
const ALL_TYPES = allTypes(ROWS);
const TEXT_TYPES = allTypes(TEXT_ROWS);

/** What a stream writer writes, copied as it comes. */
class Parts extends AsyncByteQueue {
  parts: Buffer[] = [];
  override write(value: ArrayBufferView | ArrayBuffer | string): void {
    this.parts.push(
      typeof value === 'string'
        ? Buffer.from(value)
        : ArrayBuffer.isView(value)
          ? Buffer.from(value.buffer, value.byteOffset, value.byteLength)
          : Buffer.from(value),
    );
    this.parts[this.parts.length - 1] = Buffer.from(this.parts[this.parts.length - 1]!);
  }
}

/** The batches serialized one by one as they come (a batch without copies is valid only until the next). */
async function ipcOf(batches: AsyncIterable<RecordBatch>): Promise<Buffer> {
  const sink = new Parts();
  const writer = new RecordBatchStreamWriter();
  writer.reset(sink);
  for await (const batch of batches) writer.write(batch);
  writer.finish();
  return Buffer.concat(sink.parts);
}

describe('query results read from DuckDB buffers', () => {
  it('give the same Arrow stream as reading value by value, every type and NULL, batches with or without copies', async () => {
    const byValue = await ipcOf(recordBatches(await conn.stream(ALL_TYPES), DEFAULT_BATCH_ROWS, true, false));
    const copied = await ipcOf(recordBatches(await conn.stream(ALL_TYPES), DEFAULT_BATCH_ROWS, true));
    const reused = await ipcOf(recordBatches(await conn.stream(ALL_TYPES), DEFAULT_BATCH_ROWS, false));
    const table = tableFromIPC(byValue);
    expect(table.numRows).toBe(ROWS - Math.ceil((ROWS - 3) / 7));
    expect(table.batches.length).toBeGreaterThan(1);
    expect(copied.equals(byValue)).toBe(true);
    expect(reused.equals(byValue)).toBe(true);

    // writeArrowStream (through a ring, with a writer that takes its time) writes the same bytes.
    const written: Buffer[] = [];
    await writeArrowStream(
      await conn.stream(ALL_TYPES),
      async (bytes) => {
        const copy = Buffer.from(bytes);
        await new Promise((r) => setTimeout(r, 1));
        expect(Buffer.from(bytes).equals(copy)).toBe(true); // not written over while the writer holds it
        written.push(copy);
      },
      () => false,
    );
    expect(Buffer.concat(written).equals(byValue)).toBe(true);
  });

  it('reads booleans that are all true as true (a bitmap of no nulls is not the values)', async () => {
    const batches: RecordBatch[] = [];
    for await (const b of recordBatches(await conn.stream('SELECT true AS t, i % 2 = 0 AS e FROM range(3) t(i)'), 100, true)) batches.push(b);
    expect(batches[0]!.toArray().map((r) => [r.t, r.e])).toEqual([
      [true, true],
      [true, false],
      [true, true],
    ]);
  });

  it('give the same CSV as the node-api values, every type and NULL, through a ring that fills many times', async () => {
    const reader = await conn.runAndReadAll(TEXT_TYPES);
    const expected = [reader.columnNames().map(csvCell).join(','), ...reader.getRows().map((r) => r.map(csvCell).join(','))].join('\n') + '\n';
    const written: Buffer[] = [];
    await writeCsvRows(
      await conn.stream(TEXT_TYPES),
      new ByteRing(
        async (bytes) => {
          const copy = Buffer.from(bytes);
          await new Promise((r) => setImmediate(r));
          written.push(copy);
        },
        4096,
        2,
      ),
      () => false,
    );
    const csv = Buffer.concat(written).toString();
    expect(csv.length).toBeGreaterThan(1_000_000);
    expect(csv).toBe(expected);
  });

  it('read every string where DuckDB put it, however its strings lie: sorted, filtered, stored, long, constant, NULL', async () => {
    await conn.run(
      `CREATE OR REPLACE TABLE stored_strings AS SELECT i, 'stored string number ' || i AS s, repeat('wide', 1500) || i AS w FROM range(6000) t(i)`,
    );
    const sql = `SELECT
        ${nullable("'generated, longer than twelve: ' || md5(i::VARCHAR)", 9, 'generated')},
        CASE WHEN i % 3 = 0 THEN s WHEN i % 3 = 1 THEN 'short' || (i % 10) ELSE 'a constant string longer than twelve bytes' END AS mixed,
        ${nullable('w', 4, 'wide')}, ${nullable("s || '/' || w", 5, 'joined')}
      FROM stored_strings WHERE i % 7 <> 2 ORDER BY hash(i)`;
    const expected = (await conn.runAndReadAll(sql)).getRows();
    const result = await conn.stream(sql);
    let row = 0;
    let views = 0;
    let longStrings = 0;
    // Every cell compared; the first that differs is reported (an expect per cell cost more than the reading).
    let firstDiff: { row: number; column: number; got: string | null; want: string | null } | null = null;
    for (;;) {
      const chunk = await result.fetchChunk();
      if (!chunk || chunk.rowCount === 0) break;
      for (let c = 0; c < chunk.columnCount; c++) {
        const col = new RawColumn(chunk, c, chunk.rowCount, 16);
        for (let r = 0; r < chunk.rowCount; r++) {
          const want = expected[row + r]![c] as string | null;
          const got = col.valid(r) ? decoder.decode(col.bytes(r)) : null;
          if (got !== want) firstDiff ??= { row: row + r, column: c, got, want };
          if (want !== null && Buffer.byteLength(want) > 12) longStrings++;
        }
        views += col.stringViews;
      }
      row += chunk.rowCount;
    }
    expect(firstDiff).toBeNull();
    expect(row).toBe(expected.length);
    expect(longStrings).toBeGreaterThan(10_000); // 15,971
    // Read through a few views each (one string per cell would be thousands per chunk).
    expect(views).toBeGreaterThan(0);
    expect(views).toBeLessThan(longStrings / 100);
  });

  it('give the same JSON lines as the node-api row objects, every type and NULL, wide integers as numbers with every digit', async () => {
    const sql = `SELECT *, 9007199254740993::BIGINT AS beyond, 1 AS "2", 3 AS "1" FROM (${TEXT_TYPES})`;
    let expected = '';
    // The node-api gives wide integers as text; ours are JSON numbers with every digit (one type per column).
    const wide = ['bi', 'ubi', 'h', 'all_null', 'beyond'];
    const result = await conn.stream(sql);
    const names = result.deduplicatedColumnNames();
    for await (const rows of result.yieldRowObjectJson()) {
      for (const r of rows) {
        // In the query's column order (an object would put the integer-named columns "1" and "2" first).
        let line = `{${names.map((n) => `${JSON.stringify(n)}:${JSON.stringify(r[n])}`).join(',')}}`;
        for (const name of wide) line = line.replace(new RegExp(`"${name}":"(-?\\d+)"`), `"${name}":$1`);
        expected += line + '\n';
      }
    }
    const written: Buffer[] = [];
    await writeJsonRows(await conn.stream(sql), new ByteRing(async (b) => void written.push(Buffer.from(b)), 4096, 2), () => false);
    const json = Buffer.concat(written).toString();
    expect(json.length).toBeGreaterThan(1_000_000);
    expect(json).toBe(expected);
    expect(json).toMatch(/"beyond":9007199254740993[,}]/);
  });

  it('writes an empty result as its header (CSV) or schema (Arrow)', async () => {
    const written: Buffer[] = [];
    const ring = new ByteRing(async (b) => void written.push(Buffer.from(b)));
    await writeCsvRows(await conn.stream('SELECT 1 AS "a,b", 2 AS c WHERE false'), ring, () => false);
    expect(Buffer.concat(written).toString()).toBe('"a,b",c\n');
    const arrow: Buffer[] = [];
    await writeArrowStream(
      await conn.stream('SELECT 1::BIGINT AS a WHERE false'),
      async (b) => void arrow.push(Buffer.from(b)),
      () => false,
    );
    const table = tableFromIPC(Buffer.concat(arrow));
    expect(table.numRows).toBe(0);
    expect(String(table.schema.fields[0]!.type)).toBe('Int64');
  });
});

describe('ByteRing', () => {
  it('keeps a buffer until its writer is done, grows for a piece larger than a buffer, and writes everything in order', async () => {
    const got: string[] = [];
    let busy = 0;
    const ring = new ByteRing(
      async (bytes) => {
        busy++;
        expect(busy).toBeLessThanOrEqual(2);
        const before = Buffer.from(bytes).toString();
        await new Promise((r) => setTimeout(r, 1));
        expect(Buffer.from(bytes).toString()).toBe(before);
        got.push(before);
        busy--;
      },
      16,
      2,
    );
    let expected = '';
    for (let i = 0; i < 200; i++) {
      const piece = i % 50 === 0 ? 'x'.repeat(100_000) : `row ${i};`;
      ring.text(piece);
      expected += piece;
      await ring.flush();
    }
    await ring.end();
    expect(got.join('')).toBe(expected);
  });
});
