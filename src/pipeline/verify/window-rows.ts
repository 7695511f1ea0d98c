/**
 * The lake's rows of one scope in a block range by the rule a window fetched again replaces by
 * (datasets/scope-rows.ts): the scope's columns, its topics, and the range on the block column or, for a dataset
 * whose rows carry a block time but no block number (event_logs), between the times of the range's first and last
 * block. verify counts by it the listings the prefix sums of verify.ts' ScopeRows cannot (scopes other than one
 * address, ranges by time); each count is one query, and a range by time costs the block times of its two ends.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import type { DatasetDef, EndpointDef } from '../../datasets/dataset.js';
import { scopeRowsTable, type ScopeRowsValue } from '../../datasets/scope-rows.js';
import type { BlockRange } from '../../extract/page.js';
import { ident, literal } from '../../load/sql.js';

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
    if (!table) throw new Error(`${this.def.name}: the rows of a ${this.window.endpoint.id} window cannot be told (not replaceable)`);
    await this.conn.run(
      `CREATE OR REPLACE TEMP TABLE ${TABLE} (${table.columns.map(([c, type]) => `${ident(c)} ${type}`).join(', ')});
       INSERT INTO ${TABLE} VALUES ${table.rows.map((r) => `(${r.map(sqlValue).join(', ')})`).join(', ')}`,
    );
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
    if (!this.times) throw new Error(`${this.def.name}: its rows carry a block time only, and no block endpoint is known to ask the range's times`);
    return this.times(range);
  }
}
