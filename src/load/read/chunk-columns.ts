import os from 'node:os';
import duckdb from '@duckdb/node-bindings';
import type { DuckDBDataChunk, DuckDBType } from '@duckdb/node-api';
import { DuckDBTypeId } from '../../ducklake/node-api.js';

/**
 * The columns of a fetched DuckDB chunk read where DuckDB put them (its vectors' data and validity buffers), for
 * the writers of large results (`chainlake query` as CSV or Arrow). The node-api's own reading (`getItem`,
 * `getRows`) makes one JavaScript object per cell and keeps them for the whole chunk; a chunk's objects then
 * outlive a young-generation collection, are promoted and pile up in V8's old generation until its next full
 * collection, so a process's memory grew with the size of the result. Reading the buffers makes next to
 * nothing per cell.
 *
 * DuckDB's buffers are in the machine's byte order and Arrow's are little-endian: on a big-endian machine
 * nothing is read raw (RAW_READABLE) and the writers fall back to the node-api's values.
 */
export const RAW_READABLE = os.endianness() === 'LE';

/**
 * Frees what a chunk holds beyond its vectors' fixed buffers (its strings' heap) once its rows are written. The
 * chunk's JavaScript object frees the rest when V8 collects it, and a chunk that outlived a young-generation
 * collection (a busy writer's chunks often do) waits for the next full one, holding its strings all the while
 * (docs/performance.md, "Query results"). Nothing may read the chunk, or a view of it (RawColumn), afterwards.
 */
export function releaseChunk(chunk: DuckDBDataChunk): void {
  duckdb.data_chunk_reset(chunk.chunk);
}

/** Bytes of a DECIMAL's stored value, by its width (DuckDB stores it in the smallest integer that holds it). */
export function decimalStorageBytes(width: number): 2 | 4 | 8 | 16 {
  return width <= 4 ? 2 : width <= 9 ? 4 : width <= 18 ? 8 : 16;
}

/** Bytes per value of a type DuckDB stores flat and that is read raw here; undefined for the others. */
export function rawWidth(t: DuckDBType): number | undefined {
  if (!RAW_READABLE) return undefined;
  switch (t.typeId) {
    case DuckDBTypeId.BOOLEAN:
      return duckdb.sizeof_bool;
    case DuckDBTypeId.TINYINT:
    case DuckDBTypeId.UTINYINT:
      return 1;
    case DuckDBTypeId.SMALLINT:
    case DuckDBTypeId.USMALLINT:
      return 2;
    case DuckDBTypeId.INTEGER:
    case DuckDBTypeId.UINTEGER:
    case DuckDBTypeId.FLOAT:
    case DuckDBTypeId.DATE:
      return 4;
    case DuckDBTypeId.BIGINT:
    case DuckDBTypeId.UBIGINT:
    case DuckDBTypeId.DOUBLE:
    case DuckDBTypeId.TIMESTAMP:
    case DuckDBTypeId.TIMESTAMP_TZ:
      return 8;
    case DuckDBTypeId.DECIMAL:
      return decimalStorageBytes(t.width);
    case DuckDBTypeId.VARCHAR:
    case DuckDBTypeId.BLOB:
      return STRING_T_BYTES;
    default:
      return undefined;
  }
}

/** DuckDB's string_t: a 4-byte length, then the bytes inlined up to 12, or a 4-byte prefix and a pointer. */
const STRING_T_BYTES = 16;
const INLINED_MAX = 12;

export type TypedArrayCtor<T> = { new (buffer: ArrayBuffer, byteOffset: number, length: number): T; BYTES_PER_ELEMENT: number };

/** A fixed-width number column's values, as a typed array over DuckDB's buffer. */
export type NumberArray =
  Int8Array | Int16Array | Int32Array | BigInt64Array | Uint8Array | Uint16Array | Uint32Array | BigUint64Array | Float32Array | Float64Array;

/** The typed array each fixed-width number type reads as (the CSV and Arrow writers read DuckDB's buffers through it). */
export const NUMBER_ARRAYS: Partial<Record<DuckDBTypeId, TypedArrayCtor<NumberArray>>> = {
  [DuckDBTypeId.TINYINT]: Int8Array,
  [DuckDBTypeId.SMALLINT]: Int16Array,
  [DuckDBTypeId.INTEGER]: Int32Array,
  [DuckDBTypeId.BIGINT]: BigInt64Array,
  [DuckDBTypeId.UTINYINT]: Uint8Array,
  [DuckDBTypeId.USMALLINT]: Uint16Array,
  [DuckDBTypeId.UINTEGER]: Uint32Array,
  [DuckDBTypeId.UBIGINT]: BigUint64Array,
  [DuckDBTypeId.FLOAT]: Float32Array,
  [DuckDBTypeId.DOUBLE]: Float64Array,
};

/** One column of a chunk: its data (rows × width bytes) and validity (a bit per row, set when valid; null: all valid). */
export class RawColumn {
  readonly data: Uint8Array;
  readonly validity: Uint8Array | null;
  constructor(
    chunk: DuckDBDataChunk,
    column: number,
    readonly rows: number,
    readonly width: number,
  ) {
    // The buffers are views of the chunk's native memory: valid while the chunk is, which its holder keeps.
    const vector = duckdb.data_chunk_get_vector(chunk.chunk, column);
    this.data = duckdb.vector_get_data(vector, rows * width);
    // The mask is 64-bit words of bits, least significant first: on a little-endian machine, byte i >> 3 holds row
    // i at bit i & 7, as in Arrow's bitmaps.
    this.validity = (duckdb.vector_get_validity(vector, Math.ceil(rows / 64) * 8) as Uint8Array | null) ?? null;
  }

  valid(i: number): boolean {
    const v = this.validity;
    return v === null || (v[i >>> 3]! & (1 << (i & 7))) !== 0;
  }

  /** The data as a typed array (a view where DuckDB's buffer is aligned for it, else a copy). */
  view<T>(Ctor: TypedArrayCtor<T>): T {
    const d = this.data;
    const n = d.byteLength / Ctor.BYTES_PER_ELEMENT;
    if (d.byteOffset % Ctor.BYTES_PER_ELEMENT === 0) return new Ctor(d.buffer as ArrayBuffer, d.byteOffset, n);
    return new Ctor(d.slice().buffer, 0, n);
  }

  /** The bytes of string i (VARCHAR, BLOB). */
  bytes(i: number): Uint8Array {
    const d = this.data;
    const at = i * STRING_T_BYTES;
    const length = d[at]! | (d[at + 1]! << 8) | (d[at + 2]! << 16) | (d[at + 3]! << 24);
    if (length <= INLINED_MAX) return d.subarray(at + 4, at + 4 + length);
    const heap = this.longStrings();
    if (heap !== null) {
      const k = heap.cluster[i]!;
      const from = Number(heap.pointers[2 * i + 1]! - heap.bases[k]!);
      return heap.views[k]!.subarray(from, from + length);
    }
    return duckdb.get_data_from_pointer(d.buffer as ArrayBuffer, d.byteOffset + at + 8, length);
  }

  /** How many views serve the column's long strings (stringHeap): 0 where they are read one by one. */
  get stringViews(): number {
    return this.longStrings()?.views.length ?? 0;
  }

  /** The chunk's long strings as a few views (see stringHeap); null where they are read one by one. */
  private heap: StringHeap | null | undefined;

  private longStrings(): StringHeap | null {
    if (this.heap === undefined) this.heap = this.stringHeap();
    return this.heap;
  }

  /**
   * Views over the memory that holds the column's strings longer than 12 bytes, one per run of strings that lie
   * close together (DuckDB keeps a vector's strings in its string heap, a few large blocks, mostly in row order):
   * each string is then a slice of its run's view. The binding's view of one string is a Buffer of its own per
   * cell, a call and an object per cell (what it saves: docs/performance.md, "Query results").
   * Within a run no two strings are a page apart, so every page a view covers holds string bytes; only the
   * strings' own bytes are ever read through it. Strings scattered more widely are read one by one.
   */
  private stringHeap(): StringHeap | null {
    const d = this.data;
    if (d.byteOffset % 8 !== 0) return null;
    const pointers = new BigUint64Array(d.buffer as ArrayBuffer, d.byteOffset, this.rows * 2);
    const lengths = new Uint32Array(d.buffer as ArrayBuffer, d.byteOffset, this.rows * 4);
    const cluster = new Int32Array(this.rows);
    const bases: bigint[] = [];
    const ends: bigint[] = [];
    for (let r = 0; r < this.rows; r++) {
      const length = lengths[4 * r]!;
      if (length <= INLINED_MAX || !this.valid(r)) continue;
      const p = pointers[2 * r + 1]!;
      const end = p + BigInt(length);
      const k = bases.length - 1;
      if (k >= 0 && p >= bases[k]! && p < ends[k]! + PAGE_BYTES && end - bases[k]! <= VIEW_MAX_BYTES) {
        if (end > ends[k]!) ends[k] = end;
        cluster[r] = k;
      } else {
        if (bases.length >= this.rows / MIN_STRINGS_PER_VIEW) return null;
        bases.push(p);
        ends.push(end);
        cluster[r] = k + 1;
      }
    }
    if (bases.length === 0) return null;
    const views = bases.map((base, k) => duckdb.get_data_from_pointer(new BigUint64Array([base]).buffer, 0, Number(ends[k]! - base)));
    return { pointers, cluster, bases, views };
  }
}

interface StringHeap {
  /** The column's string_t values as 64-bit words: word 2i + 1 is string i's pointer. */
  pointers: BigUint64Array;
  /** The view of each row's string. */
  cluster: Int32Array;
  bases: bigint[];
  views: Uint8Array[];
}

/** Strings further apart than a page start a new view. */
const PAGE_BYTES = 4096n;
/** A view's most bytes (the binding takes a 32-bit length). */
const VIEW_MAX_BYTES = 1n << 30n;
/** Fewer strings per view than this on average: read them one by one. */
const MIN_STRINGS_PER_VIEW = 8;
