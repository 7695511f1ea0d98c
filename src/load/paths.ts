import path from 'node:path';
import type { Network } from '../datasets/dataset.js';

/** The one name of a partition's file: a merge replaces it whole, by rename, so a folder reader sees one file. */
export const PARTITION_FILE = 'data.parquet';

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
  staging(runId: string): string {
    return path.join(this.stagingRoot, runId);
  }
  datasetDir(dataset: string): string {
    return path.join(this.root, dataset);
  }
  /** `<dataset>/network=<n>/<partition>=<value>/`. */
  partitionDir(dataset: string, partitionColumn: string, network: Network | string, value: string): string {
    return path.join(this.root, dataset, `network=${network}`, `${partitionColumn}=${value}`);
  }
  /** The Parquet file of a partition; replaced whole, by rename, on every merge. */
  partitionFile(dataset: string, partitionColumn: string, network: Network | string, value: string): string {
    return path.join(this.partitionDir(dataset, partitionColumn, network, value), PARTITION_FILE);
  }
  /** Glob of every file of a dataset, for views (absolute: a view must work from any working directory). */
  datasetGlob(dataset: string): string {
    return path.join(this.root, dataset, '*', '*', '*.parquet');
  }
  relative(file: string): string {
    return path.relative(this.root, file);
  }
  absolute(relative: string): string {
    return path.join(this.root, relative);
  }
}
