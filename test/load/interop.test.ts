import { spawnSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects, type FileMetaData, type SchemaElement } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawCompanion, type ColumnKind } from '../../src/datasets/column.js';
import type { DatasetDef } from '../../src/datasets/dataset.js';
import { DATASETS } from '../../src/datasets/registry.js';
import { commitRun } from '../../src/load/write/commit-run.js';
import { openEngine } from '../../src/load/engine.js';
import { LakePaths } from '../../src/load/paths.js';
import { CLI } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { listLake, withDuck } from './helpers.js';

/**
 * Interoperable files: every Parquet file of a lake produced by the demo job (which covers every dataset
 * the demo asks for, and so grows with it) is read by a second, independent Parquet reader (hyparquet,
 * pure JS) and must give exactly the values DuckDB reads — including DECIMAL(38,0) amounts (decoded from
 * their two's-complement bytes, since hyparquet's own decimal decoding goes through a JS number) and
 * TIMESTAMPTZ (UTC-adjusted microseconds).
 */
type Query = (sql: string) => Promise<Record<string, unknown>[]>;

let dir: string;
let cleanup: () => Promise<void>;
let lake: string;
let files: string[];

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir('chainlake-interop-'));
  lake = path.join(dir, 'lake');
  const r = spawnSync(process.execPath, [CLI, 'run', 'jobs/demo.json', '--lake', lake, '-q'], { encoding: 'utf8', timeout: 300_000 });
  // Exit 1 means some windows failed (e.g. an API not wired yet); what committed is what we check.
  expect([0, 1], r.stderr).toContain(r.status);
  files = (await listLake(lake)).filter((f) => f.endsWith('.parquet') && !f.startsWith('_staging/'));
}, 300_000);

afterAll(async () => {
  await cleanup?.();
});

/** Signed big-endian two's complement, as Parquet stores FIXED_LEN_BYTE_ARRAY decimals. */
function decimalFromBytes(bytes: Uint8Array, scale: number): string {
  let v = 0n;
  for (const b of bytes) v = (v << 8n) | BigInt(b);
  if (bytes.length && bytes[0]! & 0x80) v -= 1n << BigInt(bytes.length * 8);
  if (scale === 0) return v.toString();
  const neg = v < 0n;
  const digits = (neg ? -v : v).toString().padStart(scale + 1, '0');
  return `${neg ? '-' : ''}${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
}

const isDecimal = (e: SchemaElement) => e.logical_type?.type === 'DECIMAL' || e.converted_type === 'DECIMAL';

/** Metadata whose decimal columns are left undecoded, so the test decodes their bytes exactly. */
function rawDecimals(meta: FileMetaData): FileMetaData {
  return { ...meta, schema: meta.schema.map((e) => (isDecimal(e) ? { ...e, converted_type: undefined, logical_type: undefined } : e)) };
}

/** The value as both sides are compared: exact text for decimals, bigint microseconds for timestamps. */
function normalise(v: unknown): unknown {
  if (v === undefined || v === null) return null;
  if (typeof v === 'bigint') return v.toString();
  if (Array.isArray(v)) return v.map(normalise);
  if (v instanceof Date) return v.toISOString();
  return v;
}

describe('files read by an independent Parquet reader', () => {
  it('the demo lake holds a file for every dataset whose windows committed rows', async () => {
    const committed = await queryCatalog(lake, `SELECT DISTINCT dataset FROM windows WHERE status = 'committed' AND rows_got > 0 ORDER BY dataset`);
    expect(committed.length).toBeGreaterThan(0);
    expect([...new Set(files.map((f) => f.split('/')[1]))].sort()).toEqual(committed.map((c) => c.dataset));
  });

  it('every file of the demo lake: same schema types, ZSTD, and the same value in every cell as DuckDB', async () => {
    await withDuck(async (q) => {
      for (const f of files) expect(await compareFile(lake, f, q)).toBeGreaterThan(0);
    });
  });

  it('every dataset of the registry, every column kind, extreme values and NULLs: the same values', async () => {
    const synthetic = path.join(dir, 'synthetic');
    await buildSyntheticLake(synthetic);
    const written = (await listLake(synthetic)).filter((f) => f.endsWith('.parquet') && !f.startsWith('_staging/'));
    expect(new Set(written.map((f) => f.split('/')[1]))).toEqual(new Set(Object.keys(DATASETS)));
    await withDuck(async (q) => {
      for (const f of written) expect(await compareFile(synthetic, f, q)).toBe(2);
    });
  });

  it("the catalog's statistics of every file (read from its footer) are what DuckDB's COPY ... RETURN_STATS reports", async () => {
    const synthetic = path.join(dir, 'synthetic');
    const stats = await queryCatalog(
      synthetic,
      `SELECT sc.path || t.path || d.path AS file, c.column_name AS name, s.min_value, s.max_value, s.null_count::BIGINT AS nulls, s.value_count::BIGINT AS n
       FROM ducklake_file_column_stats s JOIN ducklake_data_file d USING (data_file_id) JOIN ducklake_table t ON t.table_id = d.table_id
       JOIN ducklake_schema sc ON sc.schema_id = t.schema_id JOIN ducklake_column c ON c.table_id = s.table_id AND c.column_id = s.column_id AND c.parent_column IS NULL`,
    );
    const files = [...new Set(stats.map((r) => String(r.file)))];
    expect(files.length).toBeGreaterThanOrEqual(Object.keys(DATASETS).length);
    let compared = 0;
    await withDuck(async (q) => {
      for (const f of files) {
        const [r] = await q(
          `COPY (SELECT * FROM read_parquet('${path.join(synthetic, f)}')) TO '${path.join(dir, 'restat.parquet')}' (FORMAT parquet, COMPRESSION zstd, RETURN_STATS)`,
        );
        const returned = r!.column_statistics as { entries?: unknown[] } | unknown[];
        const list = (v: unknown) => (Array.isArray(v) ? v : ((v as { entries: unknown[] }).entries ?? [])) as { key: string; value: unknown }[];
        const byName = new Map(
          list(returned).map((e) => [e.key.replace(/^"|"$/g, ''), Object.fromEntries(list(e.value).map((x) => [x.key, String(x.value)]))]),
        );
        for (const s of stats.filter((x) => x.file === f)) {
          const want = byName.get(String(s.name));
          expect(want, `${f} ${String(s.name)}`).toBeDefined();
          expect({ min: s.min_value ?? null, max: s.max_value ?? null, nulls: String(s.nulls), n: String(s.n) }, `${f} ${String(s.name)}`).toEqual({
            min: want!.min ?? null,
            max: want!.max ?? null,
            nulls: want!.null_count,
            n: want!.num_values,
          });
          compared++;
        }
      }
    });
    expect(compared).toBeGreaterThan(100);
  });
});

/** Reads one file with hyparquet and with DuckDB and compares schema types, codecs and every cell. */
async function compareFile(root: string, f: string, q: Query): Promise<number> {
  const file = path.join(root, f);
  const buffer = await asyncBufferFromFile(file);
  const meta = await parquetMetadataAsync(buffer);
  for (const rg of meta.row_groups) for (const c of rg.columns) expect(c.meta_data?.codec, f).toBe('ZSTD');

  const described = await q(`DESCRIBE SELECT * FROM read_parquet('${file}', hive_partitioning = false)`);
  const leaves = new Map(meta.schema.slice(1).map((e) => [e.name, e]));
  const select: string[] = [];
  for (const d of described) {
    const name = String(d.column_name);
    const type = String(d.column_type);
    const el = leaves.get(name);
    const q_ = `"${name}"`;
    if (type.startsWith('DECIMAL')) {
      expect(el && isDecimal(el), `${f} ${name}`).toBe(true);
      expect(el!.logical_type).toMatchObject({ type: 'DECIMAL', precision: 38, scale: 0 });
      select.push(`CAST(${q_} AS VARCHAR) AS ${q_}`);
    } else if (type === 'TIMESTAMP WITH TIME ZONE') {
      expect(el?.logical_type, `${f} ${name}`).toMatchObject({ type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MICROS' });
      select.push(`epoch_us(${q_}) AS ${q_}`);
    } else if (type === 'JSON') {
      select.push(`CAST(${q_} AS VARCHAR) AS ${q_}`);
    } else select.push(q_);
  }
  const duck = await q(`SELECT ${select.join(', ')} FROM read_parquet('${file}', hive_partitioning = false)`);

  const raw = (await parquetReadObjects({
    file: buffer,
    metadata: rawDecimals(meta),
    compressors,
    parsers: { timestampFromMicroseconds: (v: bigint) => v } as never,
  })) as Record<string, unknown>[];
  const decoded = (await parquetReadObjects({ file: buffer, metadata: meta, compressors })) as Record<string, unknown>[];
  expect(raw.length, f).toBe(duck.length);

  // Compared cell by cell, collecting mismatches (an expect per cell would dominate the run time).
  const mismatches: string[] = [];
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  for (let i = 0; i < duck.length && mismatches.length < 10; i++) {
    for (const d of described) {
      const name = String(d.column_name);
      const type = String(d.column_type);
      const mine = duck[i]![name];
      const theirs = raw[i]![name];
      let ok: boolean;
      if (type.startsWith('DECIMAL')) {
        const exact = theirs == null ? null : decimalFromBytes(theirs as Uint8Array, 0);
        // hyparquet's own decoding (through a JS number) agrees up to a double's precision.
        const approx = Number(decoded[i]![name]);
        ok = exact === (mine ?? null) && (exact === null || Math.abs(approx - Number(exact)) <= Number(exact) * 1e-15);
      } else if (type === 'JSON') {
        ok = same(normalise(theirs), mine == null ? null : JSON.parse(mine as string));
      } else {
        ok = same(normalise(theirs), normalise(mine));
      }
      if (!ok) mismatches.push(`${f} row ${i} ${name}: duckdb ${String(normalise(mine))} vs hyparquet ${String(normalise(theirs))}`);
    }
  }
  expect(mismatches).toEqual([]);
  return duck.length;
}

/** One staged value per column kind: row 0 holds the extremes, row 1 NULLs and the other edge cases. */
function sample(kind: ColumnKind, row: 0 | 1, nullable: boolean): unknown {
  const nul = row === 1 && nullable;
  switch (kind) {
    case 'address':
      return nul ? null : `0x${String(row + 1).padStart(40, '0')}`;
    case 'hash':
      return nul ? null : `0x${String(row + 1).padStart(64, 'a')}`;
    case 'hex':
      return nul ? null : row === 0 ? '0xdeadbeef' : '0x';
    case 'bigint':
      return nul ? null : row === 0 ? '9223372036854775807' : '-9223372036854775808';
    case 'amount':
      return row === 0 ? '99999999999999999999999999999999999999' : null;
    case 'timestamp':
      return row === 0 ? '2024-03-01T23:59:59.999Z' : '2024-03-01T00:00:00.000Z';
    case 'bool':
      return nul ? null : row === 0;
    case 'text':
      return nul ? null : row === 0 ? 'héllo, "world"\n\t✓' : '';
    case 'int_array':
      return nul ? null : row === 0 ? [0, 1, 2147483647] : [];
    case 'json':
      return nul ? null : row === 0 ? '{"a":[1,2.5,{"b":null}],"c":"d"}' : '[]';
    case 'double':
      return nul ? null : row === 0 ? 1.5e-7 : -1234567.25;
  }
}

/** A lake written by the load stage itself from staged rows: one partition file for every registry dataset. */
async function buildSyntheticLake(root: string): Promise<void> {
  const paths = new LakePaths(root);
  const staging = paths.staging('synthetic');
  await mkdir(staging, { recursive: true });
  const datasets: { def: DatasetDef; stagedFiles: string[] }[] = [];
  for (const def of Object.values(DATASETS)) {
    const lines = ([0, 1] as const).map((row) => {
      const values: Record<string, unknown> = { __partition: '2024-03-01' };
      for (const c of def.columns) {
        values[c.name] = sample(c.kind, row, c.nullable);
        // The amount that does not fit DECIMAL(38,0): NULL there, exact text in the companion.
        if (c.kind === 'amount') values[rawCompanion(c.name)] = row === 1 ? (2n ** 256n - 1n).toString() : null;
      }
      return JSON.stringify(values);
    });
    const file = path.join(staging, `${def.name}.ndjson`);
    await writeFile(file, lines.join('\n') + '\n');
    datasets.push({ def, stagedFiles: [file] });
  }
  const engine = await openEngine({ tempDir: path.join(staging, 'tmp') });
  try {
    await commitRun({
      engine,
      paths,
      runId: 'synthetic',
      ingestedAt: '2024-03-02T00:00:00.000Z',
      stagingDir: path.join(staging, 'batch-0'),
      network: 'mainnet',
      datasets,
      rejectFiles: [],
      windows: [],
      watermarks: [],
      run: () => ({ job: 'synthetic', startedAt: '2024-03-02T00:00:00.000Z', finishedAt: '2024-03-02T00:00:00.000Z', status: 'complete', report: {} }),
    });
  } finally {
    engine.close();
  }
}
