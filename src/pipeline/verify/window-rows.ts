/**
 * The lake's rows of one scope in a block range by the rule a window fetched again replaces by
 * (datasets/scope-rows.ts): the scope's columns, its topics, and the range on the block column or, for a dataset
 * whose rows carry a block time but no block number (event_logs), between the times of the range's first and last
 * block. verify counts by it the listings the prefix sums of verify.ts' ScopeRows cannot (scopes other than one
 * address, ranges by time); each count is one query, and a range by time costs the block times of its two ends.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import type { DatasetDef, EndpointDef } from '../../datasets/dataset.js';
import { scopeRowsTable, type ScopeRowsTable, type ScopeRowsValue } from '../../datasets/scope-rows.js';
import type { BlockRange } from '../../extract/page.js';
import { ident, literal } from '../../load/sql.js';
import { bugError } from '../../errors.js';

const TABLE = '__verify_window';

const sqlValue = (v: ScopeRowsValue): string => (v === null ? 'NULL' : typeof v === 'string' ? literal(v) : String(v));

export class WindowRows {
  constructor(
    private readonly conn: DuckDBConnection,
    private readonly def: DatasetDef,
    private readonly network: string,
    private readonly window: { endpoint: EndpointDef; scope: Record<string, string> },
    /** The times of a range's first and last block (asked of the API), for a dataset ranged by time. */
    private readonly times?: (r: BlockRange) => Promise<{ from: string; to: string }>,
    /** Whether the lake has the dataset at all (no relation: no rows). */
    private readonly exists = true,
  ) {}

  /** Whether a range's count costs requests (block times): counts of single windows inside a held range are skipped. */
  get byTime(): boolean {
    return this.def.blockColumn === undefined;
  }

  async count(range: BlockRange): Promise<number> {
    if (!this.exists) return 0;
    const times = this.byTime ? await this.timesOf(range) : undefined;
    const table = scopeRowsTable(this.def, [{ ...this.window, range, ...(times ? { times } : {}) }]);
    if (!table) throw bugError(`${this.def.name}: the rows of a ${this.window.endpoint.id} window cannot be told (not replaceable), and verify counted them`);
    await createScopeRows(this.conn, TABLE, table);
    try {
      const rows = (
        await this.conn.runAndReadAll(
          `SELECT count(*)::BIGINT FROM ${ident(this.def.name)} WHERE network = ${literal(this.network)} AND coalesce((${table.held(TABLE)}), false)`,
        )
      ).getRowsJS();
      return Number(rows[0]![0]);
    } finally {
      await this.conn.run(`DROP TABLE IF EXISTS ${TABLE}`);
    }
  }

  /** The times of the range's ends; the API asked once per block (blockTimes remembers them per caller). */
  timesOf(range: BlockRange): Promise<{ from: string; to: string }> {
    if (!this.times) throw bugError(`${this.def.name}: its rows carry a block time only, and no block endpoint is known to ask the range's times`);
    return this.times(range);
  }
}

/** A ScopeRowsTable as the temporary table `name` (its rows written as values: a verify's few windows). */
export async function createScopeRows(conn: DuckDBConnection, name: string, table: ScopeRowsTable): Promise<void> {
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE ${name} (${table.columns.map(([c, type]) => `${ident(c)} ${type}`).join(', ')});
     INSERT INTO ${name} VALUES ${table.rows.map((r) => `(${r.map(sqlValue).join(', ')})`).join(', ')}`,
  );
}

/** Any time: a scope's windows widened to every block, for "rows of the scope" (scopeRowsTable by time). */
const ALL_TIME = { from: '0001-01-01T00:00:00.000Z', to: '9999-12-31T23:59:59.999Z' };

/**
 * The rows of a dataset ranged by time (event_logs) that belong to one of `scopes` but lie in none of their
 * windows' ranges (`runs`: the scope's committed windows joined where consecutive, each with its ends' times).
 */
export async function timedRowsOutside(
  conn: DuckDBConnection,
  def: DatasetDef,
  network: string,
  scopes: readonly { endpoint: EndpointDef; scope: Record<string, string>; runs: readonly { range: BlockRange; times: { from: string; to: string } }[] }[],
): Promise<{ n: number; from: string | null; to: string | null }> {
  const anyTime = scopeRowsTable(
    def,
    scopes.map((s) => ({ endpoint: s.endpoint, scope: s.scope, range: { from: 0, to: Number.MAX_SAFE_INTEGER }, times: ALL_TIME })),
  );
  const inWindow = scopeRowsTable(
    def,
    scopes.flatMap((s) => s.runs.map((r) => ({ endpoint: s.endpoint, scope: s.scope, range: r.range, times: r.times }))),
  );
  if (!anyTime || !inWindow) return { n: 0, from: null, to: null };
  const [mine, held] = ['__verify_scopes', '__verify_windows'];
  await createScopeRows(conn, mine, anyTime);
  await createScopeRows(conn, held, inWindow);
  try {
    const time = ident(def.blockTimeColumn!);
    const [row] = (
      await conn.runAndReadAll(
        `SELECT count(*)::BIGINT, min(${time})::VARCHAR, max(${time})::VARCHAR FROM ${ident(def.name)}
         WHERE network = ${literal(network)} AND coalesce((${anyTime.held(mine)}), false) AND NOT coalesce((${inWindow.held(held)}), false)`,
      )
    ).getRowsJS() as [bigint, string | null, string | null][];
    return { n: Number(row![0]), from: row![1], to: row![2] };
  } finally {
    await conn.run(`DROP TABLE IF EXISTS ${mine}; DROP TABLE IF EXISTS ${held}`);
  }
}
