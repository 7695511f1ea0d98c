// s3rver ships no types: the part used here.
// @ts-expect-error no declaration file
import S3rver from 's3rver';
import type { StoreConnection } from '../../src/distributed/store.js';
import { tempDir } from '../helpers/lake.js';

export interface TestS3 {
  /** Its endpoint and region, as the CLI resolves them from the environment and a stage takes them. */
  connection: Required<StoreConnection>;
  /** The credentials the AWS SDK finds in the environment by itself (its own chain, not chainlake's). */
  credentials: Record<string, string>;
  /** The variables a chainlake process needs to reach it (the usual AWS ones): the connection's and the credentials. */
  env: Record<string, string>;
  stop(): Promise<void>;
}

/**
 * An S3-compatible server (s3rver) in this process on a free loopback port, with the given buckets. Its objects are
 * files in a test temp directory (test/helpers/lake.ts tempDir: in memory where the machine has room), as the lakes'
 * are: every fragment and lake file of a test goes through it.
 */
export async function startS3(buckets: string[]): Promise<TestS3> {
  const { dir: directory, cleanup } = await tempDir('chainlake-s3-');
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory, configureBuckets: buckets.map((name) => ({ name })) });
  const { port } = (await server.run()) as { port: number };
  const connection = { endpoint: `http://127.0.0.1:${port}`, region: 'us-east-1' };
  const credentials = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' };
  return {
    connection,
    credentials,
    env: { AWS_ENDPOINT_URL: connection.endpoint, AWS_REGION: connection.region, ...credentials },
    async stop() {
      await server.close();
      await cleanup();
    },
  };
}
