import type { LiveRun } from '../pipeline/live.js';

const fmtInt = (n: number): string => n.toLocaleString('en-US');

function fmtDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '--:--';
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${String(sec).padStart(2, '0')}` : `${m}:${String(sec).padStart(2, '0')}`;
}

/**
 * The lines of a live progress display: one per dataset with windows done/total, rows, request rate,
 * retries and an ETA. The ETA weighs rows against the rows the API said to expect once windows have
 * started, and windows otherwise.
 */
export function progressLines(live: LiveRun, nowMs = Date.now()): string[] {
  const elapsed = Math.max(0.001, (nowMs - live.startedAt) / 1000);
  const names = [...live.datasets.keys()];
  const width = Math.max(7, ...names.map((n) => n.length));
  const lines: string[] = [];
  for (const d of live.datasets.values()) {
    const t = live.totals(d.name);
    const finished = d.windowsDone + d.windowsFailed;
    const share =
      d.windowsTotal === 0
        ? 1
        : t.expected > 0 && finished < d.windowsTotal
          ? Math.min(d.rows / Math.max(t.expected, d.rows), finished / d.windowsTotal + 0.999 / d.windowsTotal)
          : finished / d.windowsTotal;
    const eta = share >= 1 ? 0 : share <= 0 ? NaN : (elapsed * (1 - share)) / share;
    lines.push(
      `${d.name.padEnd(width)}  windows ${String(finished).padStart(String(d.windowsTotal).length)}/${d.windowsTotal}` +
        `  rows ${fmtInt(d.rows).padStart(9)}  ${(t.requests / elapsed).toFixed(1).padStart(6)} req/s` +
        `  retries ${t.retries}${d.windowsFailed ? `  failed ${d.windowsFailed}` : ''}${d.rejects ? `  rejects ${d.rejects}` : ''}` +
        `  ${share >= 1 ? 'done' : `ETA ${fmtDuration(eta)}`}`,
    );
  }
  return lines;
}

/** Redraws the progress lines in place on a terminal, a few times a second. */
export class TerminalProgress {
  private timer: NodeJS.Timeout | undefined;
  private drawn = 0;
  private live: LiveRun | undefined;

  constructor(private readonly out: NodeJS.WriteStream = process.stderr) {}

  start(live: LiveRun): void {
    this.live = live;
    this.timer = setInterval(() => this.draw(), 250);
    this.timer.unref();
    this.draw();
  }

  /** Writes a log line above the progress block. */
  print(line: string): void {
    this.clear();
    this.out.write(line + '\n');
    this.draw();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.draw();
    this.drawn = 0;
    this.live = undefined;
  }

  private clear(): void {
    if (this.drawn > 0) this.out.write(`\x1b[${this.drawn}A\x1b[0J`);
    this.drawn = 0;
  }

  private draw(): void {
    if (!this.live) return;
    this.clear();
    const columns = this.out.columns || 120;
    const lines = progressLines(this.live).map((l) => (l.length > columns - 1 ? l.slice(0, columns - 1) : l));
    if (lines.length) this.out.write(lines.join('\n') + '\n');
    this.drawn = lines.length;
  }
}
