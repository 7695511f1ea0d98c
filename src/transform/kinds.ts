import type { ColumnKind } from '../datasets/column.js';
import {
  acceptAddress,
  acceptAddressBytes,
  acceptAmount,
  acceptAmountBytes,
  acceptBigint,
  acceptBigintBytes,
  acceptBool,
  acceptBoolBytes,
  acceptHash,
  acceptHashBytes,
  acceptHex,
  acceptHexBytes,
  acceptIntArray,
  acceptText,
  acceptTextBytes,
  acceptTimestamp,
  acceptTimestampBytes,
  canonicalAsIs,
  canonicalBool,
  canonicalHex,
  canonicalIntArray,
  convertAddress,
  convertAmount,
  convertBigint,
  convertBool,
  convertDouble,
  convertHash,
  convertHex,
  convertIntArray,
  convertJson,
  convertText,
  convertTimestamp,
  type Acceptor,
  type ByteAcceptor,
  type Canonical,
  type Converter,
} from './convert.js';

/**
 * How a kind's values may be staged exactly as received, leaving their canonical form to DuckDB. The four
 * must agree: what `accept` passes (and `acceptBytes` on its bytes), `canonical` computes in JavaScript and `sql`
 * in DuckDB, equal to what the kind's converter gives (test/transform/received.test.ts checks it).
 */
export interface ReceivedForm {
  accept: Acceptor;
  /** `accept` on the UTF-8 bytes of a JSON string without escapes (the list scanner's view); none: never from bytes. */
  acceptBytes?: ByteAcceptor;
  canonical: (raw: unknown) => Canonical;
  /**
   * The same canonical value in SQL, over the received value read as text (`x`). `upperCaseHex`: whether a
   * value read may have upper-case hex digits; when none may, lower-casing hex is skipped (it was a tenth of
   * DuckDB's typing work: docs/performance.md, "Typing while fetching").
   */
  sql: (x: string, upperCaseHex: boolean) => string;
}

/** Everything a column kind means, in every stage: adding a kind is adding one entry here. */
export interface KindSpec {
  /** The column's type in the lake (and in `describe`). */
  lakeType: string;
  /** How a converted value is staged in NDJSON: the type read_json reads it as. */
  stagedType: string;
  /** SQL from the staged value (`c`) to the lake type; none: it is already. */
  cast?: (c: string) => string;
  /** An API value to its canonical staged value, or the reason it is a reject. */
  convert: Converter;
  /** None: values of this kind always go through `convert`. */
  received?: ReceivedForm;
}

const asIs = (x: string): string => x;
const lowerHex = { canonical: canonicalHex, sql: (x: string, upperCaseHex: boolean): string => (upperCaseHex ? `lower(${x})` : x) };
const plain = { canonical: canonicalAsIs, sql: asIs };

export const KINDS: Readonly<Record<ColumnKind, KindSpec>> = {
  address: {
    lakeType: 'VARCHAR',
    stagedType: 'VARCHAR',
    convert: convertAddress,
    received: { accept: acceptAddress, acceptBytes: acceptAddressBytes, ...lowerHex },
  },
  hash: { lakeType: 'VARCHAR', stagedType: 'VARCHAR', convert: convertHash, received: { accept: acceptHash, acceptBytes: acceptHashBytes, ...lowerHex } },
  hex: { lakeType: 'VARCHAR', stagedType: 'VARCHAR', convert: convertHex, received: { accept: acceptHex, acceptBytes: acceptHexBytes, ...lowerHex } },
  bigint: {
    lakeType: 'BIGINT',
    stagedType: 'VARCHAR',
    cast: (c) => `CAST(${c} AS BIGINT)`,
    convert: convertBigint,
    received: { accept: acceptBigint, acceptBytes: acceptBigintBytes, ...plain },
  },
  // Through HUGEINT: DuckDB's direct VARCHAR -> DECIMAL cast is ~500x slower (design §3), and the transform has
  // already sent anything over 38 digits to the `_raw` companion, so the HUGEINT cast cannot overflow.
  amount: {
    lakeType: 'DECIMAL(38,0)',
    stagedType: 'VARCHAR',
    cast: (c) => `CAST(CAST(${c} AS HUGEINT) AS DECIMAL(38,0))`,
    convert: convertAmount,
    received: { accept: acceptAmount, acceptBytes: acceptAmountBytes, ...plain },
  },
  timestamp: {
    lakeType: 'TIMESTAMP WITH TIME ZONE',
    stagedType: 'VARCHAR',
    cast: (c) => `CAST(${c} AS TIMESTAMPTZ)`,
    convert: convertTimestamp,
    received: { accept: acceptTimestamp, acceptBytes: acceptTimestampBytes, ...plain },
  },
  // A JSON boolean is read as the text 'true' or 'false'.
  bool: {
    lakeType: 'BOOLEAN',
    stagedType: 'BOOLEAN',
    convert: convertBool,
    received: { accept: acceptBool, acceptBytes: acceptBoolBytes, canonical: canonicalBool, sql: (x) => `(${x} IN ('1', 'true'))` },
  },
  text: { lakeType: 'VARCHAR', stagedType: 'VARCHAR', convert: convertText, received: { accept: acceptText, acceptBytes: acceptTextBytes, ...plain } },
  // A list is read as its JSON text, which DuckDB's list cast reads (`["0","1"]` -> [0, 1]).
  int_array: {
    lakeType: 'INTEGER[]',
    stagedType: 'INTEGER[]',
    convert: convertIntArray,
    received: { accept: acceptIntArray, canonical: canonicalIntArray, sql: (x) => `CAST(${x} AS INTEGER[])` },
  },
  json: { lakeType: 'JSON', stagedType: 'VARCHAR', cast: (c) => `CAST(${c} AS JSON)`, convert: convertJson },
  double: { lakeType: 'DOUBLE', stagedType: 'DOUBLE', convert: convertDouble },
};

/** SQL from a staged value of `kind` to its lake type. */
export const castSql = (kind: ColumnKind, c: string): string => KINDS[kind].cast?.(c) ?? c;
