// A newer chainlake declaring more columns than the lake's table has: the table gains them (one snapshot, as an
// ALTER TABLE ADD COLUMN), earlier snapshots read as they were, and a changed type is refused by name.
import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { DuckDbCatalog } from '../../src/ducklake/catalog-db.js';
import { initialiseCatalog } from '../../src/ducklake/ddl.js';
import { listColumns, findTable, currentSnapshot } from '../../src/ducklake/reader.js';
import { ensureTable } from '../../src/load/write/lake-tables.js';
import { datasetShape } from '../../src/load/schema.js';
import { getDataset } from '../../src/datasets/registry.js';

describe('a dataset table across chainlake versions', () => {
  it('gains the columns a newer declaration adds, and refuses a changed type', async () => {
    const instance = await DuckDBInstance.create(':memory:');
    const catalog = new DuckDbCatalog(await instance.connect());
    try {
      await initialiseCatalog(catalog, { dataPath: '/nowhere/lake' });
      const shape = datasetShape(getDataset('transactions'));
      const older = { ...shape, columns: shape.columns.filter((c) => c.name !== 'extra') };
      await ensureTable(catalog, older);
      const created = await currentSnapshot(catalog);
      const table = await findTable(catalog, created.snapshotId, 'transactions');
      expect((await listColumns(catalog, table.tableId, created.snapshotId)).map((c) => c.name)).not.toContain('extra');

      await ensureTable(catalog, shape);
      const altered = await currentSnapshot(catalog);
      expect(altered.snapshotId).toBe(created.snapshotId + 1);
      expect(altered.schemaVersion).toBe(created.schemaVersion + 1);
      const now = await listColumns(catalog, table.tableId, altered.snapshotId);
      const extra = now.find((c) => c.name === 'extra')!;
      expect(extra).toMatchObject({ type: 'json', initialDefault: null });
      // Column ids are never reused: the new one comes after every id the table had.
      expect(extra.columnId).toBeGreaterThan(Math.max(...(await listColumns(catalog, table.tableId, created.snapshotId)).map((c) => c.columnId)));
      expect((await listColumns(catalog, table.tableId, created.snapshotId)).map((c) => c.name)).not.toContain('extra');
      expect(await catalog.query(`SELECT changes_made FROM ducklake_snapshot_changes WHERE snapshot_id = $1`, [altered.snapshotId])).toEqual([
        { changes_made: `altered_table:${table.tableId}` },
      ]);
      // Nothing to add a second time: no new snapshot.
      await ensureTable(catalog, shape);
      expect((await currentSnapshot(catalog)).snapshotId).toBe(altered.snapshotId);

      const changed = { ...shape, columns: shape.columns.map((c) => (c.name === 'nonce' ? { ...c, type: 'VARCHAR' } : c)) };
      await expect(ensureTable(catalog, changed)).rejects.toThrow(/column nonce as int64; this chainlake declares it VARCHAR/);
    } finally {
      instance.closeSync();
    }
  });
});
