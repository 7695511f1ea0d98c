import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import type { RunningSimulator } from '../../src/simulator/index.js';

/** What the proxy sends instead of the simulator's answer; undefined passes the answer through. */
export interface Rewritten {
  status?: number;
  body: string;
  contentType?: string;
}
export type Rewrite = (url: URL, status: number, body: string) => Rewritten | undefined;

export interface Proxy {
  urls: RunningSimulator['urls'];
  /** Requests seen, by path (without the query). */
  seen: Map<string, number>;
  setRewrite(fn: Rewrite | undefined): void;
  close(): Promise<void>;
}

/**
 * A loopback proxy in front of the simulator that can rewrite any response (status, body, content type):
 * the simulator is faithful and never sends bad data, so bad data is made here, and chainlake's stages run
 * unchanged (the technique of test/datasets/rejects.test.ts).
 */
export async function startProxy(sim: RunningSimulator, rewrite?: Rewrite): Promise<Proxy> {
  let fn = rewrite;
  const origin = new URL(sim.urls.mainnet).origin;
  const seen = new Map<string, number>();
  const server = http.createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const url = new URL(req.url!, origin);
      seen.set(url.pathname, (seen.get(url.pathname) ?? 0) + 1);
      const up = await request(origin + req.url, {
        method: req.method as 'GET' | 'POST',
        headers: Object.fromEntries(Object.entries(req.headers).filter(([k]) => k !== 'host' && k !== 'connection')) as Record<string, string>,
        body: chunks.length ? Buffer.concat(chunks) : undefined,
        headersTimeout: 30_000,
        bodyTimeout: 30_000,
      });
      const text = await up.body.text();
      const out = fn?.(url, up.statusCode, text);
      res.writeHead(out?.status ?? up.statusCode, { 'content-type': out?.contentType ?? String(up.headers['content-type'] ?? 'application/json') });
      res.end(out ? out.body : text);
    })().catch((e: unknown) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(e));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    urls: { mainnet: `${base}/mainnet`, testnet: `${base}/testnet`, testnetAlt: `${base}/testnet-alt`, finance: `${base}/finance` },
    seen,
    setRewrite: (f) => (fn = f),
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
