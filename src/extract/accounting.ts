/** What a window (or a run) cost in calls, for the run report and the catalog. */
export class Accounting {
  requests = 0;
  retries = 0;
  throttles = 0;
  bytes = 0;
  latencyTotalMs = 0;
  latencyMaxMs = 0;

  recordResponse(latencyMs: number, bytes: number): void {
    this.requests++;
    this.bytes += bytes;
    this.latencyTotalMs += latencyMs;
    if (latencyMs > this.latencyMaxMs) this.latencyMaxMs = latencyMs;
  }

  add(other: Accounting): void {
    this.requests += other.requests;
    this.retries += other.retries;
    this.throttles += other.throttles;
    this.bytes += other.bytes;
    this.latencyTotalMs += other.latencyTotalMs;
    this.latencyMaxMs = Math.max(this.latencyMaxMs, other.latencyMaxMs);
  }

  get latencyMeanMs(): number {
    return this.requests === 0 ? 0 : this.latencyTotalMs / this.requests;
  }
}
