import { mkdir, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Catalog } from '../../src/load/catalog.js';
import { LakePaths } from '../../src/load/paths.js';
import { tempDir } from '../helpers/lake.js';

/**
 * Opening a catalog sets its ledger up (creates or migrates the tables) unless its lake_meta records that the
 * current declaration set it up already: then the setup is skipped. A recorded declaration that is not the current
 * one (an older chainlake's, or none) is set up again.
 */
let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir, cleanup } = await tempDir('chainlake-catalog-setup-'));
});
afterAll(async () => {
  await cleanup?.();
});

const tables = (c: Catalog): Promise<string[]> =>
  c.lake.query(`SELECT table_name AS t FROM duckdb_tables() WHERE database_name = current_database() ORDER BY 1`).then((r) => r.map((x) => String(x.t)));
const recorded = (c: Catalog): Promise<string | undefined> => c.meta('ledger_schema');

describe('catalog setup', () => {
  it('records the declaration it set up, skips the setup while it holds, and sets up again when it changed', async () => {
    const paths = new LakePaths(dir);
    const first = await Catalog.hold(paths, async (c) => ({ tables: await tables(c), signature: await recorded(c) }));
    expect(first.tables).toEqual(expect.arrayContaining(['lake_meta', 'runs', 'windows', 'watermarks', 'requests', 'verifications', 'ducklake_snapshot']));
    expect(first.signature).toMatch(/^[0-9a-f]{64}$/);

    // With the current declaration recorded, a table dropped behind chainlake's back stays dropped: nothing ran.
    await Catalog.hold(paths, (c) => c.lake.query('DROP TABLE verifications'));
    expect(await Catalog.hold(paths, tables)).not.toContain('verifications');

    // Another declaration recorded (an older chainlake's): the next open sets the ledger up again and records the current one.
    await Catalog.hold(paths, (c) => c.lake.query(`UPDATE lake_meta SET value = 'an older declaration' WHERE key = 'ledger_schema'`));
    const again = await Catalog.hold(paths, async (c) => ({ tables: await tables(c), signature: await recorded(c) }));
    expect(again.tables).toContain('verifications');
    expect(again.signature).toBe(first.signature);
  });

  it("removes what a killed process's DuckDB left in the catalog's temporary directory when it opens the catalog", async () => {
    const paths = new LakePaths(path.join(dir, 'killed'));
    await mkdir(paths.root);
    await Catalog.hold(paths, async () => undefined);
    // As a SIGKILL during a spilling catalog statement leaves it (seen in test/reliability/crashes.test.ts).
    const tmp = `${paths.catalog}.tmp`;
    await mkdir(tmp, { recursive: true });
    await writeFile(path.join(tmp, 'duckdb_temp_storage_S32K-0.tmp'), Buffer.alloc(32 * 1024));
    await Catalog.hold(paths, async () => undefined);
    expect(await readdir(tmp).catch(() => 'gone')).toBe('gone');
    expect((await readdir(paths.root)).sort()).toEqual(['catalog.duckdb']);
  });
});
