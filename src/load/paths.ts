import path from 'node:path';
import type { Network } from '../datasets/dataset.js';

/** Where things live in a lake (design §4). The one place that knows the layout. */
export class LakePaths {
  readonly root: string;
  constructor(lakeDir: string) {
    this.root = path.resolve(lakeDir);
  }
  get catalog(): string {
    return path.join(this.root, 'catalog.duckdb');
  }
  get stagingRoot(): string {
    return path.join(this.root, '_staging');
  }
  /**
   * Windows a run fetched and could not commit for a lake-side reason, kept for the next run to commit (the ledger's
   * `fetched` rows name them): `_kept/<runId>/`, apart from the staging that recovery clears.
   */
  get keptRoot(): string {
    return path.join(this.root, '_kept');
  }
  kept(runId: string): string {
    return path.join(this.keptRoot, runId);
  }
  staging(runId: string): string {
    return path.join(this.stagingRoot, runId);
  }
  /** Where the DuckLake's tables keep their files: data path + the schema `main`'s path (as the reference extension lays it out). */
  get tablesRoot(): string {
    return path.join(this.root, 'main');
  }
  /** A table's folder: `main/<table>/`, holding `network=<n>/<partition column>=<value>/ducklake-<uuid>.parquet`. */
  datasetDir(dataset: string): string {
    return path.join(this.tablesRoot, dataset);
  }
  /** A table's folder in the layout before the lake was a DuckLake (`<table>/network=…/…/data.parquet`): `catalog rebuild` converts it. */
  legacyDatasetDir(dataset: string): string {
    return path.join(this.root, dataset);
  }
  /** `main/<dataset>/network=<n>/<partition>=<value>/`. */
  partitionDir(dataset: string, partitionColumn: string, network: Network | string, value: string): string {
    return path.join(this.datasetDir(dataset), `network=${network}`, `${partitionColumn}=${value}`);
  }
  relative(file: string): string {
    return path.relative(this.root, file);
  }
  absolute(relative: string): string {
    return path.join(this.root, relative);
  }
}
