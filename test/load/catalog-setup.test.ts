import { copyFile, mkdir, readdir, writeFile } from 'node:fs/promises';
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

  it('a new catalog after the first is a copy of it with its own lake: data path, root, schema UUID, same views and comments', async () => {
    const [a, b] = [new LakePaths(path.join(dir, 'new-a')), new LakePaths(path.join(dir, 'new-b'))];
    const own = (c: Catalog) =>
      Promise.all([
        c.lake.query(`SELECT value FROM ducklake_metadata WHERE key = 'data_path' AND scope IS NULL`),
        c.meta('root'),
        c.lake.query(`SELECT CAST(schema_uuid AS VARCHAR) AS u FROM ducklake_schema`),
        c.lake.query(`SELECT table_name AS t, column_name AS c, comment FROM duckdb_columns() WHERE database_name = current_database() ORDER BY 1, 2`),
        c.lake.query(`SELECT key FROM lake_meta WHERE key NOT LIKE 'view:%' ORDER BY 1`),
      ]);
    for (const p of [a, b]) await mkdir(p.root);
    const [dataA, rootA, uuidA, columnsA, keysA] = await Catalog.hold(a, own);
    const [dataB, rootB, uuidB, columnsB, keysB] = await Catalog.hold(b, own);
    expect([dataA[0]!.value, rootA]).toEqual([`${a.root}/`, a.root]);
    expect([dataB[0]!.value, rootB]).toEqual([`${b.root}/`, b.root]);
    expect(uuidB[0]!.u).not.toBe(uuidA[0]!.u);
    // Views of every dataset with their comments from the start, as the first commit used to make them.
    expect(columnsB).toEqual(columnsA);
    expect(columnsB.filter((r) => r.t === 'blocks' && r.comment)).not.toHaveLength(0);
    expect(keysB).toEqual(keysA);
    expect(keysB.map((r) => r.key)).not.toContain('adopt');
    expect(await readdir(b.root)).toEqual(['catalog.duckdb']);
  });

  it('a copy killed before it adopted its lake is adopted by the next open; a copy left unlinked is removed', async () => {
    const [a, c] = [new LakePaths(path.join(dir, 'copy-a')), new LakePaths(path.join(dir, 'copy-c'))];
    await mkdir(a.root);
    await mkdir(c.root);
    await Catalog.hold(a, (x) => x.lake.query(`INSERT INTO lake_meta VALUES ('adopt', 'true')`));
    // As a kill right after placeNewCatalog linked the copy leaves it, and a kill before the link leaves its copy.
    await copyFile(a.catalog, c.catalog);
    await copyFile(a.catalog, `${c.catalog}.4242.new`);
    const [data, root, keys] = await Catalog.hold(c, (x) =>
      Promise.all([
        x.lake.query(`SELECT value FROM ducklake_metadata WHERE key = 'data_path' AND scope IS NULL`),
        x.meta('root'),
        x.lake.query(`SELECT key FROM lake_meta WHERE key = 'adopt'`),
      ]),
    );
    expect([data[0]!.value, root, keys]).toEqual([`${c.root}/`, c.root, []]);
    expect(await readdir(c.root)).toEqual(['catalog.duckdb']);
  });
});
