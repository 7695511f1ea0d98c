import type { DatasetDef } from './dataset.js';
import { transactions } from './transactions.js';

/** Every dataset chainlake knows, by name. The one list: CLI choices, describe and the catalog read it. */
export const DATASETS: Readonly<Record<string, DatasetDef>> = Object.freeze({
  [transactions.name]: transactions,
});

export function datasetNames(): string[] {
  return Object.keys(DATASETS).sort();
}

export function getDataset(name: string): DatasetDef {
  const def = DATASETS[name];
  if (!def) {
    throw new UnknownDatasetError(name);
  }
  return def;
}

export class UnknownDatasetError extends Error {
  constructor(readonly dataset: string) {
    super(`unknown dataset '${dataset}'; known datasets: ${datasetNames().join(', ')}`);
    this.name = 'UnknownDatasetError';
  }
}
