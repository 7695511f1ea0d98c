import {
  Binary,
  Bool,
  type Data,
  DateDay,
  Decimal,
  type DataType,
  Field,
  Float32,
  Float64,
  Int16,
  Int32,
  Int64,
  Int8,
  List,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  TimeUnit,
  Timestamp,
  Uint16,
  Uint32,
  Uint64,
  Uint8,
  Utf8,
} from 'apache-arrow';
import {
  DuckDBBlobValue,
  DuckDBDateValue,
  DuckDBDecimalValue,
  DuckDBListValue,
  DuckDBTimestampTZValue,
  DuckDBTimestampValue,
  DuckDBTypeId,
  type DuckDBDataChunk,
  type DuckDBResult,
  type DuckDBType,
  type DuckDBValue,
} from '@duckdb/node-api';

/**
 * DuckDB results as Apache Arrow record batches. DuckDB has typed the values (the lake's casts, or the query's);
 * this only moves them into Arrow's buffers, type for type: BIGINT -> Int64, DECIMAL(38,0) -> Decimal128(38,0),
 * TIMESTAMPTZ -> Timestamp(µs, UTC), DATE -> Date(day), INTEGER[] -> List<Int32>, JSON and VARCHAR -> Utf8.
 * Types Arrow has no counterpart for here (HUGEINT, INTERVAL, STRUCT, MAP, UUID…) travel as their text.
 */

/** One column of a batch being built: values pushed row by row, then finished into Arrow data. */
interface Sink {
  readonly type: DataType;
  push(v: DuckDBValue): void;
  finish(): Data;
}

class Validity {
  private bits: boolean[] = [];
  nulls = 0;
  add(valid: boolean): void {
    this.bits.push(valid);
    if (!valid) this.nulls++;
  }
  get length(): number {
    return this.bits.length;
  }
  bitmap(): Uint8Array | undefined {
    if (this.nulls === 0) return undefined;
    const out = new Uint8Array(Math.ceil(this.bits.length / 8));
    this.bits.forEach((b, i) => {
      if (b) out[i >> 3]! |= 1 << (i & 7);
    });
    return out;
  }
}

type NumericArray = Int8Array | Int16Array | Int32Array | BigInt64Array | Uint8Array | Uint16Array | Uint32Array | BigUint64Array | Float32Array | Float64Array;

/** Fixed-width values (integers, floats, days, microseconds): `of` turns a DuckDB value into the buffer's element. */
class FixedSink<T extends number | bigint> implements Sink {
  private values: T[] = [];
  private readonly valid = new Validity();
  constructor(
    readonly type: DataType,
    private readonly Array: new (values: T[]) => NumericArray,
    private readonly of: (v: DuckDBValue) => T,
    private readonly zero: T,
  ) {}
  push(v: DuckDBValue): void {
    this.valid.add(v !== null);
    this.values.push(v === null ? this.zero : this.of(v));
  }
  finish(): Data {
    return makeData({
      type: this.type as Int32,
      length: this.values.length,
      nullCount: this.valid.nulls,
      nullBitmap: this.valid.bitmap(),
      data: new this.Array(this.values) as Int32Array,
    });
  }
}

class BoolSink implements Sink {
  readonly type = new Bool();
  private readonly values = new Validity();
  private readonly valid = new Validity();
  push(v: DuckDBValue): void {
    this.valid.add(v !== null);
    this.values.add(v === true);
  }
  finish(): Data {
    const length = this.valid.length;
    return makeData({
      type: this.type,
      length,
      nullCount: this.valid.nulls,
      nullBitmap: this.valid.bitmap(),
      data: this.values.bitmap() ?? new Uint8Array(Math.ceil(length / 8)),
    });
  }
}

/** Utf8 (text of any value) or Binary (blobs). */
class VarSink implements Sink {
  private chunks: Uint8Array[] = [];
  private offsets: number[] = [0];
  private bytes = 0;
  private readonly valid = new Validity();
  private static readonly encoder = new TextEncoder();
  constructor(readonly type: Utf8 | Binary) {}
  push(v: DuckDBValue): void {
    this.valid.add(v !== null);
    if (v !== null) {
      const b = v instanceof DuckDBBlobValue ? v.bytes : VarSink.encoder.encode(typeof v === 'string' ? v : String(v));
      this.chunks.push(b);
      this.bytes += b.length;
    }
    this.offsets.push(this.bytes);
  }
  finish(): Data {
    const data = new Uint8Array(this.bytes);
    let at = 0;
    for (const c of this.chunks) {
      data.set(c, at);
      at += c.length;
    }
    return makeData({
      type: this.type as Utf8,
      length: this.offsets.length - 1,
      nullCount: this.valid.nulls,
      nullBitmap: this.valid.bitmap(),
      valueOffsets: new Int32Array(this.offsets),
      data,
    });
  }
}

/** Decimal128: each value as four little-endian 32-bit words of its two's complement. */
class DecimalSink implements Sink {
  private words: number[] = [];
  private readonly valid = new Validity();
  constructor(readonly type: Decimal) {}
  push(v: DuckDBValue): void {
    this.valid.add(v !== null);
    let x = v === null ? 0n : BigInt.asUintN(128, v instanceof DuckDBDecimalValue ? v.value : BigInt(v as bigint));
    for (let i = 0; i < 4; i++) {
      this.words.push(Number(x & 0xffffffffn));
      x >>= 32n;
    }
  }
  finish(): Data {
    return makeData({
      type: this.type,
      length: this.words.length / 4,
      nullCount: this.valid.nulls,
      nullBitmap: this.valid.bitmap(),
      data: new Uint32Array(this.words),
    });
  }
}

class ListSink implements Sink {
  readonly type: List;
  private offsets: number[] = [0];
  private count = 0;
  private readonly valid = new Validity();
  constructor(private readonly child: Sink) {
    this.type = new List(new Field('item', child.type, true));
  }
  push(v: DuckDBValue): void {
    this.valid.add(v !== null);
    if (v instanceof DuckDBListValue) {
      for (const item of v.items) this.child.push(item);
      this.count += v.items.length;
    }
    this.offsets.push(this.count);
  }
  finish(): Data {
    return makeData({
      type: this.type,
      length: this.offsets.length - 1,
      nullCount: this.valid.nulls,
      nullBitmap: this.valid.bitmap(),
      valueOffsets: new Int32Array(this.offsets),
      child: this.child.finish(),
    });
  }
}

const num = (v: DuckDBValue): number => Number(v);
const big = (v: DuckDBValue): bigint => v as bigint;
const micros = (v: DuckDBValue): bigint => (v as DuckDBTimestampValue | DuckDBTimestampTZValue).micros;

/** A sink for a DuckDB type: its Arrow counterpart, or text. */
function sinkFor(t: DuckDBType): Sink {
  switch (t.typeId) {
    case DuckDBTypeId.BOOLEAN:
      return new BoolSink();
    case DuckDBTypeId.TINYINT:
      return new FixedSink(new Int8(), Int8Array, num, 0);
    case DuckDBTypeId.SMALLINT:
      return new FixedSink(new Int16(), Int16Array, num, 0);
    case DuckDBTypeId.INTEGER:
      return new FixedSink(new Int32(), Int32Array, num, 0);
    case DuckDBTypeId.BIGINT:
      return new FixedSink(new Int64(), BigInt64Array, big, 0n);
    case DuckDBTypeId.UTINYINT:
      return new FixedSink(new Uint8(), Uint8Array, num, 0);
    case DuckDBTypeId.USMALLINT:
      return new FixedSink(new Uint16(), Uint16Array, num, 0);
    case DuckDBTypeId.UINTEGER:
      return new FixedSink(new Uint32(), Uint32Array, num, 0);
    case DuckDBTypeId.UBIGINT:
      return new FixedSink(new Uint64(), BigUint64Array, big, 0n);
    case DuckDBTypeId.FLOAT:
      return new FixedSink(new Float32(), Float32Array, num, 0);
    case DuckDBTypeId.DOUBLE:
      return new FixedSink(new Float64(), Float64Array, num, 0);
    case DuckDBTypeId.DATE:
      return new FixedSink(new DateDay(), Int32Array, (v) => (v as DuckDBDateValue).days, 0);
    case DuckDBTypeId.TIMESTAMP:
      return new FixedSink(new Timestamp(TimeUnit.MICROSECOND), BigInt64Array, micros, 0n);
    case DuckDBTypeId.TIMESTAMP_TZ:
      return new FixedSink(new Timestamp(TimeUnit.MICROSECOND, 'UTC'), BigInt64Array, micros, 0n);
    case DuckDBTypeId.DECIMAL:
      return new DecimalSink(new Decimal(t.scale, t.width, 128));
    case DuckDBTypeId.BLOB:
      return new VarSink(new Binary());
    case DuckDBTypeId.LIST:
      return new ListSink(sinkFor(t.valueType));
    default:
      return new VarSink(new Utf8());
  }
}

/** The Arrow schema of a DuckDB result (the same mapping the batches use). */
export function arrowSchemaOf(names: readonly string[], types: readonly DuckDBType[]): Schema {
  return new Schema(names.map((n, i) => new Field(n, sinkFor(types[i]!).type, true)));
}

/** Rows per record batch unless asked otherwise: a few DuckDB chunks (2,048 rows each). */
export const DEFAULT_BATCH_ROWS = 16_384;

/**
 * The result as Arrow record batches of about `batchRows` rows (whole DuckDB chunks), read chunk by chunk: a
 * streaming result holds at most one batch in JavaScript.
 */
export async function* arrowBatches(result: DuckDBResult, batchRows: number = DEFAULT_BATCH_ROWS): AsyncGenerator<RecordBatch> {
  const names = result.columnNames();
  const types = result.columnTypes();
  const schema = arrowSchemaOf(names, types);
  let sinks = types.map(sinkFor);
  let rows = 0;
  const flush = (): RecordBatch => {
    const children = sinks.map((s) => s.finish());
    const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children }));
    sinks = types.map(sinkFor);
    rows = 0;
    return batch;
  };
  let emitted = false;
  for (;;) {
    const chunk: DuckDBDataChunk | null = await result.fetchChunk();
    if (!chunk || chunk.rowCount === 0) break;
    for (let c = 0; c < chunk.columnCount; c++) {
      const vector = chunk.getColumnVector(c);
      const sink = sinks[c]!;
      for (let r = 0; r < chunk.rowCount; r++) sink.push(vector.getItem(r));
    }
    rows += chunk.rowCount;
    if (rows >= batchRows) {
      emitted = true;
      yield flush();
    }
  }
  // An empty result is still one (empty) batch, so a reader learns the schema.
  if (rows > 0 || !emitted) yield flush();
}
