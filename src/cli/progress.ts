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

/** When each dataset finished, so its request rate stops at its own duration instead of falling on with the run's. */
export type FinishTimes = Map<string, number>;

/**
 * The lines of a live progress display: one per dataset with windows done/total, rows, request rate,
 * retries and an ETA, in columns whose widths do not change during the run (a failure or the first reject
 * does not shift the line). The ETA weighs rows against the rows the API said to expect once windows have
 * started, and windows otherwise.
 */
export function progressLines(live: LiveRun, nowMs = Date.now(), finished: FinishTimes = new Map()): string[] {
  const names = [...live.datasets.keys()];
  const width = Math.max(7, ...names.map((n) => n.length));
  const lines: string[] = [];
  for (const d of live.datasets.values()) {
    const t = live.totals(d.name);
    const done = d.windowsDone + d.windowsFailed;
    if (done >= d.windowsTotal && !finished.has(d.name)) finished.set(d.name, nowMs);
    const elapsed = Math.max(0.001, ((finished.get(d.name) ?? nowMs) - live.startedAt) / 1000);
    const share =
      d.windowsTotal === 0
        ? 1
        : t.expected > 0 && done < d.windowsTotal
          ? Math.min(d.rows / Math.max(t.expected, d.rows), done / d.windowsTotal + 0.999 / d.windowsTotal)
          : done / d.windowsTotal;
    const eta = share >= 1 ? 0 : share <= 0 ? NaN : (elapsed * (1 - share)) / share;
    const total = String(d.windowsTotal);
    lines.push(
      [
        d.name.padEnd(width),
        `windows ${String(done).padStart(total.length)}/${total}`,
        `rows ${fmtInt(d.rows).padStart(11)}`,
        `${(t.requests / elapsed).toFixed(1).padStart(7)} req/s`,
        `retries ${String(t.retries).padStart(5)}`,
        `failed ${String(d.windowsFailed).padStart(4)}`,
        `rejects ${String(d.rejects).padStart(6)}`,
        share >= 1 ? 'done     ' : `ETA ${fmtDuration(eta).padStart(5)}`,
      ].join('  '),
    );
  }
  return lines;
}

/** How long a retry stays on the status line once the next one does not replace it. */
const STATUS_MS = 15_000;

/**
 * Redraws the progress lines in place on a terminal, a few times a second. The block never grows past the
 * terminal's height or a line past its width: a block taller than the screen cannot be redrawn in place,
 * and each redraw would be left in the scrollback.
 */
export class TerminalProgress {
  private timer: NodeJS.Timeout | undefined;
  private drawn = 0;
  private live: LiveRun | undefined;
  private readonly finished: FinishTimes = new Map();
  private statusLine: string | undefined;
  private statusAt = 0;

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

  /** Shows a transient line under the datasets (retries: "retrying …, next in 2.0 s"); true: it was shown. */
  status(line: string): boolean {
    this.statusLine = line;
    this.statusAt = Date.now();
    this.draw();
    return true;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.statusLine = undefined;
    this.draw();
    this.drawn = 0;
    this.live = undefined;
  }

  private clear(): void {
    if (this.drawn > 0) this.out.write(`\r\x1b[${this.drawn}A\x1b[0J`);
    this.drawn = 0;
  }

  /** The block as it fits the terminal: at most rows - 1 lines, each shorter than the width. */
  frame(nowMs = Date.now()): string[] {
    const columns = this.out.columns || 80;
    const rows = this.out.rows || 24;
    const lines = this.live ? progressLines(this.live, nowMs, this.finished) : [];
    const status = this.statusLine !== undefined && nowMs - this.statusAt < STATUS_MS ? [this.statusLine] : [];
    const room = Math.max(1, rows - 1 - status.length);
    const shown = lines.length > room ? [...lines.slice(0, room - 1), `… and ${lines.length - room + 1} more datasets`] : lines;
    const fit = (l: string): string => (l.length > columns - 1 ? l.slice(0, Math.max(1, columns - 2)) + '…' : l);
    // A retry line keeps its end ("attempt 2 of 10, next in 1.5 s"); its reason gives way.
    const fitStatus = (l: string): string => {
      const tail = l.lastIndexOf(', attempt');
      if (l.length <= columns - 1 || tail < 0 || l.length - tail > columns / 2) return fit(l);
      return l.slice(0, columns - 2 - (l.length - tail)) + '…' + l.slice(tail);
    };
    return [...shown.map(fit), ...status.map(fitStatus)].slice(-Math.max(1, rows - 1));
  }

  private draw(): void {
    this.clear();
    const lines = this.frame();
    if (lines.length) this.out.write(lines.join('\n') + '\n');
    this.drawn = lines.length;
  }
}
