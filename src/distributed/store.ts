/**
 * Where a distributed lake keeps its files: a directory every machine mounts (NFS, a shared disk, one machine),
 * or S3-compatible object storage (`s3://bucket/prefix`). `lake/` holds the DuckLake's data files (the catalog's
 * data path), `fragments/<run>/` the staged fragments workers write and the committer folds in.
 *
 * DuckDB reads and writes local files only here (its httpfs extension cannot be installed), so with object
 * storage every file is written locally first and uploaded, and read from a local copy downloaded on first use
 * (names are immutable, so a copy never goes stale). The store is never asked to decide anything: every commit
 * decision is PostgreSQL's, which is why a store without conditional writes (s3rver) is fine.
 */
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, rename, rm, rmdir, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import { ChainlakeError } from '../errors.js';

export class StoreError extends ChainlakeError {
  constructor(message: string, hint?: string, cause?: unknown) {
    super(message, { code: 'CHAINLAKE_STORE', hint, cause });
  }
}

export interface StoredFile {
  location: string;
  modifiedMs: number;
}

export interface Store {
  /** As the user gave it (messages). */
  readonly location: string;
  /** The DuckLake data path this store gives (with its trailing `/`). */
  readonly dataPath: string;
  /** The local directory laid out like `dataPath`, where DuckDB writes new lake files and reads copies. */
  readonly localDataPath: string;
  /** Where to write a new fragment locally, and the location it will have once stored. */
  fragmentTarget(runId: string, name: string): Promise<{ writePath: string; location: string }>;
  /** Stores a fragment written at `writePath` (a no-op where it was written in place). */
  putFragment(target: { writePath: string; location: string }): Promise<void>;
  /** Stores a lake file written under localDataPath. */
  putLakeFile(localPath: string): Promise<void>;
  /** A local path holding the file at `location` (a fragment or a lake file). */
  localCopy(location: string): Promise<string>;
  /** The location of a path under localDataPath. */
  lakeLocation(localPath: string): string;
  /** Removes a stored file; one already gone is no error. */
  remove(location: string): Promise<void>;
  /** Every Parquet file under `lake/` or `fragments/`, with when it was written. */
  list(area: 'lake' | 'fragments'): Promise<StoredFile[]>;
  /** Removes what the store's own layout left empty (folders; object storage has none). */
  tidy(): Promise<void>;
  /** Frees what the store holds on this machine (downloaded copies). */
  close(): Promise<void>;
}

/**
 * How this machine reaches object storage, beyond the bucket `--store` names: an S3-compatible endpoint (MinIO,
 * s3rver, Ceph…; none for AWS itself) and the region. Resolved once at the top (the CLI, the library's entry) and
 * handed down, so no stage reads the environment. Credentials are not in it: the AWS SDK finds those itself.
 */
export interface StoreConnection {
  endpoint?: string;
  region?: string;
}

/**
 * The connection the usual AWS variables describe: AWS_ENDPOINT_URL_S3 over AWS_ENDPOINT_URL, AWS_REGION over
 * AWS_DEFAULT_REGION (an empty variable counts as unset), as any AWS SDK program reads them.
 */
export function storeConnectionFrom(env: Readonly<Record<string, string | undefined>>): StoreConnection {
  const endpoint = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL || undefined;
  const region = env.AWS_REGION || env.AWS_DEFAULT_REGION || undefined;
  return { ...(endpoint ? { endpoint } : {}), ...(region ? { region } : {}) };
}

/** `--store`: a directory path or `s3://bucket[/prefix]`, reached through `connection` when it is object storage. */
export async function openStore(location: string, connection: StoreConnection = {}): Promise<Store> {
  if (!location) throw new StoreError('--store is empty', 'give --store /shared/path (a directory every worker mounts) or --store s3://bucket/prefix');
  if (/^s3:\/\//i.test(location)) return S3Store.open(location, connection);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(location)) {
    throw new StoreError(`--store ${location}: not a directory path or s3:// location`, 'give --store /shared/path or --store s3://bucket/prefix');
  }
  return new LocalStore(location);
}

/** The store a catalog's data path belongs to (`<store>/lake/`), for readers given no --store. */
export function storeLocationOf(dataPath: string): string {
  return dataPath.replace(/\/?lake\/?$/, '') || dataPath;
}

export class LocalStore implements Store {
  readonly root: string;

  constructor(readonly location: string) {
    this.root = path.resolve(location);
  }

  get dataPath(): string {
    return `${path.join(this.root, 'lake')}/`;
  }

  get localDataPath(): string {
    return this.dataPath;
  }

  async fragmentTarget(runId: string, name: string) {
    const dir = path.join(this.root, 'fragments', runId);
    await mkdir(dir, { recursive: true });
    const file = path.join(dir, name);
    return { writePath: file, location: file };
  }

  async putFragment(): Promise<void> {}

  async putLakeFile(): Promise<void> {}

  async localCopy(location: string): Promise<string> {
    return location;
  }

  lakeLocation(localPath: string): string {
    return localPath;
  }

  async remove(location: string): Promise<void> {
    if (!path.resolve(location).startsWith(this.root + path.sep)) throw new StoreError(`refusing to delete ${location}: it is outside the store ${this.root}`);
    await rm(location, { force: true });
  }

  async list(area: 'lake' | 'fragments'): Promise<StoredFile[]> {
    const dir = path.join(this.root, area);
    const names = await readdir(dir, { recursive: true }).catch(() => [] as string[]);
    const out: StoredFile[] = [];
    for (const n of names) {
      const full = path.resolve(dir, String(n));
      if (!full.endsWith('.parquet')) continue;
      const s = await stat(full).catch(() => undefined);
      if (s) out.push({ location: full, modifiedMs: s.mtimeMs });
    }
    return out;
  }

  async tidy(): Promise<void> {
    // Run folders of fragments left empty once their fragments are gone (a folder with files stays).
    const dir = path.join(this.root, 'fragments');
    for (const run of await readdir(dir).catch(() => [] as string[])) await rmdir(path.join(dir, run)).catch(() => undefined);
  }

  async close(): Promise<void> {}
}

type S3 = typeof import('@aws-sdk/client-s3');

/**
 * Object storage through the AWS SDK: endpoint and region as the caller resolved them (StoreConnection, from the
 * usual AWS variables), credentials from the SDK's own chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY,
 * profiles); a custom endpoint (MinIO, s3rver, Ceph…) is addressed path-style, as those expect.
 */
export class S3Store implements Store {
  private constructor(
    readonly location: string,
    private readonly sdk: S3,
    private readonly client: import('@aws-sdk/client-s3').S3Client,
    private readonly bucket: string,
    private readonly prefix: string,
    private readonly cache: string,
  ) {}

  static async open(location: string, connection: StoreConnection = {}): Promise<S3Store> {
    const m = /^s3:\/\/([^/]+)\/?(.*)$/i.exec(location);
    if (!m || !m[1]) throw new StoreError(`--store ${location}: expected s3://bucket or s3://bucket/prefix`);
    const sdk = await import('@aws-sdk/client-s3');
    const { endpoint } = connection;
    const client = new sdk.S3Client({
      ...(endpoint ? { endpoint, forcePathStyle: true } : {}),
      region: connection.region || 'us-east-1',
    });
    const prefix = m[2]!.replace(/\/+$/, '');
    const cache = await mkdtemp(path.join(os.tmpdir(), 'chainlake-store-'));
    const store = new S3Store(location, sdk, client, m[1], prefix ? `${prefix}/` : '', cache);
    try {
      await client.send(new sdk.HeadBucketCommand({ Bucket: m[1] }));
    } catch (error) {
      await store.close();
      throw new StoreError(
        `--store ${location}: cannot reach bucket ${m[1]}: ${(error as Error).name}${(error as Error).message ? ` (${(error as Error).message})` : ''}`,
        'check the bucket name, AWS_ENDPOINT_URL (for S3-compatible stores), AWS_REGION and the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or a profile)',
        error,
      );
    }
    return store;
  }

  get dataPath(): string {
    return `s3://${this.bucket}/${this.prefix}lake/`;
  }

  get localDataPath(): string {
    return `${path.join(this.cache, 'lake')}/`;
  }

  private keyOf(location: string): string {
    const head = `s3://${this.bucket}/`;
    if (!location.startsWith(head)) throw new StoreError(`${location} is not in the store ${this.location}`);
    return location.slice(head.length);
  }

  private localOf(key: string): string {
    const rel = key.slice(this.prefix.length);
    if (!key.startsWith(this.prefix) || rel.split('/').includes('..')) throw new StoreError(`s3://${this.bucket}/${key} is not in the store ${this.location}`);
    return path.join(this.cache, ...rel.split('/'));
  }

  async fragmentTarget(runId: string, name: string) {
    const key = `${this.prefix}fragments/${runId}/${name}`;
    const writePath = this.localOf(key);
    await mkdir(path.dirname(writePath), { recursive: true });
    return { writePath, location: `s3://${this.bucket}/${key}` };
  }

  async putFragment(target: { writePath: string; location: string }): Promise<void> {
    await this.upload(target.writePath, this.keyOf(target.location));
    // The committer reads it from the store (most likely on another machine): no copy is kept here.
    await rm(target.writePath, { force: true });
  }

  async putLakeFile(localPath: string): Promise<void> {
    await this.upload(localPath, this.keyOf(this.lakeLocation(localPath)));
  }

  lakeLocation(localPath: string): string {
    const rel = path.relative(path.join(this.cache, 'lake'), localPath);
    if (rel.startsWith('..') || path.isAbsolute(rel)) throw new StoreError(`${localPath} is not under the store's local copy ${this.localDataPath}`);
    return `${this.dataPath}${rel.split(path.sep).join('/')}`;
  }

  private async upload(file: string, key: string): Promise<void> {
    const { readFile } = await import('node:fs/promises');
    await this.client.send(new this.sdk.PutObjectCommand({ Bucket: this.bucket, Key: key, Body: await readFile(file) }));
  }

  async localCopy(location: string): Promise<string> {
    const key = this.keyOf(location);
    const local = this.localOf(key);
    if (await stat(local).catch(() => undefined)) return local;
    await mkdir(path.dirname(local), { recursive: true });
    const part = `${local}.${process.pid}.part`;
    const r = await this.client.send(new this.sdk.GetObjectCommand({ Bucket: this.bucket, Key: key }));
    await pipeline(r.Body as Readable, createWriteStream(part));
    await rename(part, local);
    return local;
  }

  async remove(location: string): Promise<void> {
    const key = this.keyOf(location);
    await this.client.send(new this.sdk.DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    await rm(this.localOf(key), { force: true });
  }

  async list(area: 'lake' | 'fragments'): Promise<StoredFile[]> {
    const out: StoredFile[] = [];
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new this.sdk.ListObjectsV2Command({ Bucket: this.bucket, Prefix: `${this.prefix}${area}/`, ContinuationToken: token }),
      );
      for (const o of page.Contents ?? []) {
        if (o.Key?.endsWith('.parquet')) out.push({ location: `s3://${this.bucket}/${o.Key}`, modifiedMs: o.LastModified?.getTime() ?? 0 });
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return out;
  }

  async tidy(): Promise<void> {}

  async close(): Promise<void> {
    this.client.destroy();
    await rm(this.cache, { recursive: true, force: true });
  }
}
