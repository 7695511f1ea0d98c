/**
 * Where a distributed lake keeps its files: a directory every machine mounts at some path (NFS, a shared disk,
 * the same machine). `lake/` holds the DuckLake's data files (the catalog's data path), `fragments/<run>/` the
 * staged fragments workers write and the committer folds in. Each machine names its own mount with `--store`;
 * the catalog's data path is only the default.
 */
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { ChainlakeError } from '../errors.js';

export class StoreError extends ChainlakeError {
  constructor(message: string, hint?: string) {
    super(message, { exitCode: 2, hint });
  }
}

export class Store {
  readonly root: string;

  constructor(location: string) {
    if (!location) throw new StoreError('--store is empty', 'give --store /shared/path (a directory every worker mounts)');
    if (/^s3:\/\//i.test(location)) {
      throw new StoreError(
        `--store ${location}: object storage is not supported yet`,
        'use a directory every worker mounts (--store /shared/lake); docs/distributed.md says what is left for S3',
      );
    }
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(location)) throw new StoreError(`--store ${location}: not a directory path`, 'give --store /shared/path');
    this.root = path.resolve(location);
  }

  /** The DuckLake data path (with its trailing separator, as the spec stores it). */
  get dataPath(): string {
    return `${path.join(this.root, 'lake')}/`;
  }

  fragmentsDir(runId: string): string {
    return path.join(this.root, 'fragments', runId);
  }

  async prepareFragments(runId: string): Promise<string> {
    const dir = this.fragmentsDir(runId);
    await mkdir(dir, { recursive: true });
    return dir;
  }

  /** Removes a file of the store; one already gone is no error (a committer that died after its commit). */
  async remove(file: string): Promise<void> {
    if (!path.resolve(file).startsWith(this.root + path.sep)) throw new StoreError(`refusing to delete ${file}: it is outside the store ${this.root}`);
    await rm(file, { force: true });
  }
}
