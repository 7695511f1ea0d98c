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
import duckdb from '@duckdb/node-bindings';
import type { DuckDBDataChunk, DuckDBResult, DuckDBType, DuckDBValue } from '@duckdb/node-api';
import {
  DuckDBBlobValue,
  DuckDBDateValue,
  DuckDBDecimalValue,
  DuckDBListValue,
  DuckDBTimestampTZValue,
  DuckDBTimestampValue,
  DuckDBTypeId,
} from '../../ducklake/node-api.js';
import { decimalStorageBytes, NUMBER_ARRAYS, RawColumn, rawWidth, type NumberArray } from './chunk-columns.js';

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
  /** The bits as a validity bitmap: undefined when every value is valid. */
  bitmap(): Uint8Array | undefined {
    return this.nulls === 0 ? undefined : this.bytes();
  }
  /** The bits, always. */
  bytes(): Uint8Array {
    const out = new Uint8Array(Math.ceil(this.bits.length / 8));
    this.bits.forEach((b, i) => {
      if (b) out[i >> 3]! |= 1 << (i & 7);
    });
    return out;
  }
}

type NumericArray = NumberArray;

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
      // Every bit, also where all are true (a bitmap of no nulls would be none, and read as all false).
      data: this.values.bytes(),
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

// --- Columns read from DuckDB's buffers -----------------------------------------------------------------------

/**
 * One column of the batch being built, filled a whole chunk at a time from DuckDB's buffers (chunk-columns.ts)
 * into buffers of the batch's capacity that are kept from batch to batch: building a batch makes no object per
 * value, and a long result no garbage per batch. `finish` gives the rows so far as Arrow data: views of those
 * buffers (valid until the next `append` after `reset`) or, with `copy`, buffers of its own.
 */
interface ColumnBuilder {
  readonly type: DataType;
  append(chunk: DuckDBDataChunk, column: number, at: number, rows: number): void;
  finish(length: number, copy: boolean): Data;
  reset(): void;
}

const part = (a: Uint8Array, bytes: number, copy: boolean): Uint8Array => (copy ? a.slice(0, bytes) : a.subarray(0, bytes));

/** A validity bitmap of a batch's capacity. */
class Bits {
  readonly bytes: Uint8Array;
  nulls = 0;
  constructor(capacity: number) {
    this.bytes = new Uint8Array(Math.ceil(capacity / 8));
  }
  /** Sets the bits of a chunk's valid rows at `at`; returns how many rows are null. */
  copy(col: RawColumn, at: number): number {
    const v = col.validity;
    const bits = this.bytes;
    let nulls = 0;
    for (let i = 0; i < col.rows; i++) {
      if (v === null || (v[i >>> 3]! & (1 << (i & 7))) !== 0) bits[(at + i) >>> 3]! |= 1 << ((at + i) & 7);
      else nulls++;
    }
    this.nulls += nulls;
    return nulls;
  }
  bitmap(length: number, copy: boolean): Uint8Array | undefined {
    return this.nulls === 0 ? undefined : part(this.bytes, Math.ceil(length / 8), copy);
  }
  reset(): void {
    this.bytes.fill(0);
    this.nulls = 0;
  }
}

type FixedArray = NumberArray;
type FixedArrayCtor = new (buffer: ArrayBuffer, byteOffset: number, length: number) => FixedArray;

/** Integers, floats, days, microseconds: DuckDB's values are Arrow's, byte for byte. */
class RawFixedBuilder implements ColumnBuilder {
  private readonly bytes: Uint8Array;
  private readonly valid: Bits;
  constructor(
    readonly type: DataType,
    private readonly width: number,
    private readonly Array: FixedArrayCtor,
    capacity: number,
  ) {
    this.bytes = new Uint8Array(capacity * width);
    this.valid = new Bits(capacity);
  }
  append(chunk: DuckDBDataChunk, column: number, at: number, rows: number): void {
    const w = this.width;
    const col = new RawColumn(chunk, column, rows, w);
    this.bytes.set(col.data.subarray(0, rows * w), at * w);
    // What DuckDB leaves under a null is undefined; zero, as a value-by-value build wrote it.
    if (this.valid.copy(col, at) > 0) for (let i = 0; i < rows; i++) if (!col.valid(i)) this.bytes.fill(0, (at + i) * w, (at + i + 1) * w);
  }
  finish(length: number, copy: boolean): Data {
    const b = part(this.bytes, length * this.width, copy);
    return makeData({
      type: this.type as Int32,
      length,
      nullCount: this.valid.nulls,
      nullBitmap: this.valid.bitmap(length, copy),
      data: new this.Array(b.buffer as ArrayBuffer, b.byteOffset, length) as Int32Array,
    });
  }
  reset(): void {
    this.valid.reset();
  }
}

/** Booleans: DuckDB's bytes to Arrow's bits. */
class RawBoolBuilder implements ColumnBuilder {
  readonly type = new Bool();
  private readonly values: Bits;
  private readonly valid: Bits;
  constructor(capacity: number) {
    this.values = new Bits(capacity);
    this.valid = new Bits(capacity);
  }
  append(chunk: DuckDBDataChunk, column: number, at: number, rows: number): void {
    const w = duckdb.sizeof_bool;
    const col = new RawColumn(chunk, column, rows, w);
    this.valid.copy(col, at);
    const bits = this.values.bytes;
    // Little-endian (RAW_READABLE): a bool's first byte holds its value.
    for (let i = 0; i < rows; i++) if (col.data[i * w] !== 0 && col.valid(i)) bits[(at + i) >>> 3]! |= 1 << ((at + i) & 7);
  }
  finish(length: number, copy: boolean): Data {
    return makeData({
      type: this.type,
      length,
      nullCount: this.valid.nulls,
      nullBitmap: this.valid.bitmap(length, copy),
      data: part(this.values.bytes, Math.ceil(length / 8), copy),
    });
  }
  reset(): void {
    this.values.reset();
    this.valid.reset();
  }
}

/** DECIMAL to Decimal128: DuckDB's 128-bit values as they are, narrower ones sign-extended to four 32-bit words. */
class RawDecimalBuilder implements ColumnBuilder {
  private readonly words: Uint32Array;
  private readonly valid: Bits;
  private readonly storage: 2 | 4 | 8 | 16;
  constructor(
    readonly type: Decimal,
    capacity: number,
  ) {
    this.words = new Uint32Array(capacity * 4);
    this.valid = new Bits(capacity);
    this.storage = decimalStorageBytes(type.precision);
  }
  append(chunk: DuckDBDataChunk, column: number, at: number, rows: number): void {
    const col = new RawColumn(chunk, column, rows, this.storage);
    const out = this.words;
    if (this.storage === 16) out.set(col.view(Uint32Array).subarray(0, rows * 4), at * 4);
    else if (this.storage === 8) {
      const v = col.view(Int32Array);
      for (let i = 0; i < rows; i++) {
        const o = (at + i) * 4;
        const hi = v[2 * i + 1]!;
        out[o] = v[2 * i]!;
        out[o + 1] = hi;
        out[o + 2] = out[o + 3] = hi >> 31;
      }
    } else {
      const v = this.storage === 4 ? col.view(Int32Array) : col.view(Int16Array);
      for (let i = 0; i < rows; i++) {
        const o = (at + i) * 4;
        const x = v[i]!;
        out[o] = x;
        out[o + 1] = out[o + 2] = out[o + 3] = x >> 31;
      }
    }
    if (this.valid.copy(col, at) > 0) for (let i = 0; i < rows; i++) if (!col.valid(i)) out.fill(0, (at + i) * 4, (at + i + 1) * 4);
  }
  finish(length: number, copy: boolean): Data {
    return makeData({
      type: this.type,
      length,
      nullCount: this.valid.nulls,
      nullBitmap: this.valid.bitmap(length, copy),
      data: copy ? this.words.slice(0, length * 4) : this.words.subarray(0, length * 4),
    });
  }
  reset(): void {
    this.valid.reset();
  }
}

/** VARCHAR to Utf8, BLOB to Binary: the bytes as DuckDB holds them (DuckDB keeps VARCHAR valid UTF-8). */
class RawVarBuilder implements ColumnBuilder {
  private readonly offsets: Int32Array;
  private data = new Uint8Array(64 * 1024);
  private bytes = 0;
  private readonly valid: Bits;
  constructor(
    readonly type: Utf8 | Binary,
    capacity: number,
  ) {
    this.offsets = new Int32Array(capacity + 1);
    this.valid = new Bits(capacity);
  }
  append(chunk: DuckDBDataChunk, column: number, at: number, rows: number): void {
    const col = new RawColumn(chunk, column, rows, 16);
    this.valid.copy(col, at);
    for (let i = 0; i < rows; i++) {
      if (col.valid(i)) {
        const b = col.bytes(i);
        if (this.bytes + b.length > this.data.length) {
          const grown = new Uint8Array(Math.max(this.data.length * 2, this.bytes + b.length));
          grown.set(this.data.subarray(0, this.bytes));
          this.data = grown;
        }
        this.data.set(b, this.bytes);
        this.bytes += b.length;
      }
      this.offsets[at + i + 1] = this.bytes;
    }
  }
  finish(length: number, copy: boolean): Data {
    return makeData({
      type: this.type as Utf8,
      length,
      nullCount: this.valid.nulls,
      nullBitmap: this.valid.bitmap(length, copy),
      valueOffsets: copy ? this.offsets.slice(0, length + 1) : this.offsets.subarray(0, length + 1),
      data: part(this.data, this.bytes, copy),
    });
  }
  reset(): void {
    this.valid.reset();
    this.bytes = 0;
  }
}

/** Any other type (lists, and what travels as text): the node-api's values, one by one, into a fresh sink per batch. */
class ValueBuilder implements ColumnBuilder {
  private sink: Sink;
  constructor(private readonly duckType: DuckDBType) {
    this.sink = sinkFor(duckType);
  }
  get type(): DataType {
    return this.sink.type;
  }
  append(chunk: DuckDBDataChunk, column: number, _at: number, rows: number): void {
    const vector = chunk.getColumnVector(column);
    for (let r = 0; r < rows; r++) this.sink.push(vector.getItem(r));
  }
  finish(): Data {
    return this.sink.finish();
  }
  reset(): void {
    this.sink = sinkFor(this.duckType);
  }
}

const RAW_FIXED: Partial<Record<DuckDBTypeId, FixedArrayCtor>> = {
  ...NUMBER_ARRAYS,
  [DuckDBTypeId.DATE]: Int32Array,
  [DuckDBTypeId.TIMESTAMP]: BigInt64Array,
  [DuckDBTypeId.TIMESTAMP_TZ]: BigInt64Array,
};

/** The builder of a column: read from DuckDB's buffers where its type allows, else value by value. The Arrow type is sinkFor's either way. */
function builderFor(t: DuckDBType, capacity: number, raw: boolean): ColumnBuilder {
  const width = raw ? rawWidth(t) : undefined;
  if (width === undefined) return new ValueBuilder(t);
  if (t.typeId === DuckDBTypeId.BOOLEAN) return new RawBoolBuilder(capacity);
  if (t.typeId === DuckDBTypeId.DECIMAL) return new RawDecimalBuilder(sinkFor(t).type as Decimal, capacity);
  if (t.typeId === DuckDBTypeId.VARCHAR) return new RawVarBuilder(new Utf8(), capacity);
  if (t.typeId === DuckDBTypeId.BLOB) return new RawVarBuilder(new Binary(), capacity);
  const Array = RAW_FIXED[t.typeId];
  return Array ? new RawFixedBuilder(sinkFor(t).type, width, Array, capacity) : new ValueBuilder(t);
}

/** Rows per record batch unless asked otherwise: a few DuckDB chunks (2,048 rows each). */
export const DEFAULT_BATCH_ROWS = 16_384;

/**
 * Record batches of about `batchRows` rows (whole DuckDB chunks), read chunk by chunk: a streaming result holds
 * at most one batch in JavaScript. With `copy` false a batch's buffers are the builders' own, overwritten by the
 * next batch: for a consumer that is done with a batch (has written it out) before it asks for the next.
 * `raw` false reads every column value by value (the tests' reference for the raw reading).
 */
export async function* recordBatches(result: DuckDBResult, batchRows: number, copy: boolean, raw = true): AsyncGenerator<RecordBatch> {
  const names = result.columnNames();
  const types = result.columnTypes();
  const schema = arrowSchemaOf(names, types);
  // A batch is flushed once it reaches batchRows, so it holds at most one chunk more.
  const capacity = Math.max(1, batchRows) + duckdb.vector_size();
  const builders = types.map((t) => builderFor(t, capacity, raw));
  let rows = 0;
  const flush = (): RecordBatch => {
    const children = builders.map((b) => b.finish(rows, copy));
    const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children }));
    rows = 0;
    return batch;
  };
  let emitted = false;
  for (;;) {
    const chunk: DuckDBDataChunk | null = await result.fetchChunk();
    if (!chunk || chunk.rowCount === 0) break;
    if (rows === 0) for (const b of builders) b.reset();
    for (let c = 0; c < chunk.columnCount; c++) builders[c]!.append(chunk, c, rows, chunk.rowCount);
    rows += chunk.rowCount;
    if (rows >= batchRows) {
      emitted = true;
      yield flush();
    }
  }
  // An empty result is still one (empty) batch, so a reader learns the schema.
  if (rows > 0 || !emitted) {
    if (rows === 0) for (const b of builders) b.reset();
    yield flush();
  }
}

/** The result as Arrow record batches of about `batchRows` rows, each with buffers of its own. */
export function arrowBatches(result: DuckDBResult, batchRows: number = DEFAULT_BATCH_ROWS): AsyncGenerator<RecordBatch> {
  return recordBatches(result, batchRows, true);
}
