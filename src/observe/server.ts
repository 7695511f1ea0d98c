import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface ObservedProcess {
  registry: Registry;
  health(): { ok: boolean; problems: string[] };
}

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

/**
 * An HTML page served beside the metrics (`/report`), made when asked for: its query string in, the page out. An
 * error with a `status` (404 for a name it does not know) is answered with that status, any other with 500.
 */
export type Page = (query: URLSearchParams) => Promise<string>;

/**
 * Serves `GET /metrics` (Prometheus text format) and `GET /healthz` (200 "ok", or 503 with one problem per
 * line) for a long-running process, and the `pages` given (HTML, by path). Nothing else: any other path is 404,
 * any other method 405.
 */
export async function serveMetrics(
  observed: ObservedProcess,
  opts: { host: string; port: number; pages?: Readonly<Record<string, Page>> },
): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const [path = '/', query = ''] = (req.url ?? '/').split('?');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/metrics') {
      observed.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': observed.registry.contentType }).end(text),
        (e: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${(e as Error).message}\n`),
      );
      return;
    }
    if (path === '/healthz') {
      const h = observed.health();
      res.writeHead(h.ok ? 200 : 503, { 'content-type': 'text/plain; charset=utf-8' }).end(h.ok ? 'ok\n' : `${h.problems.join('\n')}\n`);
      return;
    }
    const page = opts.pages && Object.hasOwn(opts.pages, path) ? opts.pages[path] : undefined;
    if (page) {
      page(new URLSearchParams(query)).then(
        (html) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html),
        (e: unknown) =>
          res
            .writeHead((e as { status?: number }).status ?? 500, { 'content-type': 'text/plain; charset=utf-8' })
            .end(`${path} failed: ${(e as Error).message}\n`),
      );
      return;
    }
    const paths = ['/metrics', '/healthz', ...Object.keys(opts.pages ?? {})];
    res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found: try ${paths.join(', ')}\n`);
  });
  server.listen(opts.port, opts.host);
  await Promise.race([
    once(server, 'listening'),
    once(server, 'error').then(([e]) => {
      throw e;
    }),
  ]);
  const a = server.address() as AddressInfo;
  const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  return {
    url: `http://${host}:${a.port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
