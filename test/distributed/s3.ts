import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
// s3rver ships no types: the part used here.
// @ts-expect-error no declaration file
import S3rver from 's3rver';

export interface TestS3 {
  /** The variables a chainlake process needs to reach it (the usual AWS ones). */
  env: Record<string, string>;
  stop(): Promise<void>;
}

/** An S3-compatible server (s3rver) in this process on a free loopback port, with the given buckets. */
export async function startS3(buckets: string[]): Promise<TestS3> {
  const directory = await mkdtemp(path.join(os.tmpdir(), 'chainlake-s3-'));
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory, configureBuckets: buckets.map((name) => ({ name })) });
  const { port } = (await server.run()) as { port: number };
  return {
    env: {
      AWS_ENDPOINT_URL: `http://127.0.0.1:${port}`,
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    },
    async stop() {
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
