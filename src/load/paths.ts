import path from 'node:path';
import type { DatasetDef, Network } from '../datasets/dataset.js';

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
  /** The single Parquet file of a partition; replaced whole, by rename, on every merge. */
  partitionFile(def: DatasetDef, network: Network, value: string): string {
    return path.join(this.root, def.name, `network=${network}`, `${def.partition}=${value}`, 'data.parquet');
  }
  /** Glob of every file of a dataset, for views. */
  datasetGlob(dataset: string): string {
    return path.join(this.root, dataset, '*', '*', '*.parquet');
  }
  relative(file: string): string {
    return path.relative(this.root, file);
  }
}
