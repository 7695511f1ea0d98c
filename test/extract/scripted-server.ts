import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ScriptedReply {
  status: number;
  body?: string;
  headers?: Record<string, string>;
}

/**
 * A loopback HTTP server answering from a script, for the response shapes the simulator does not produce
 * (a `Retry-After` date, a failure envelope in an HTTP 200, a success envelope without `data`). After the
 * script runs out it repeats the last reply.
 */
export class ScriptedServer {
  readonly seen: { method: string; url: string; headers: http.IncomingHttpHeaders }[] = [];
  private server!: http.Server;
  url = '';
  inFlight = 0;
  maxInFlight = 0;

  constructor(
    private readonly script: ScriptedReply[],
    /** Real latency of every reply (ms), to have requests overlap. */
    private readonly delayMs = 0,
  ) {}

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      this.seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
      const reply = this.script[Math.min(this.seen.length - 1, this.script.length - 1)]!;
      this.maxInFlight = Math.max(this.maxInFlight, ++this.inFlight);
      const send = (): void => {
        this.inFlight--;
        const body = reply.body ?? '';
        res.writeHead(reply.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...reply.headers });
        res.end(body);
      };
      if (this.delayMs > 0) setTimeout(send, this.delayMs);
      else send();
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}

export const envelope = (status: string, message: string, results: unknown = null): string => JSON.stringify({ status, message, results });
export const ok = (results: unknown): ScriptedReply => ({ status: 200, body: envelope('200', 'OK', results) });
