/** Run events for people (text on stderr) or machines (one JSON object per line). */
export type Level = 'debug' | 'info' | 'warn' | 'error';

export interface Logger {
  log(level: Level, event: string, message: string, fields?: Record<string, unknown>): void;
}

const RANK: Record<Level, number> = { debug: 0, info: 1, warn: 2, error: 3 };

export function createLogger(opts: {
  format: 'text' | 'json';
  level: Level;
  write?: (line: string) => void;
  /** Text mode: takes an event's line instead of `write` when it returns true (a progress display's status line). */
  take?: (event: string, line: string) => boolean;
}): Logger {
  const write = opts.write ?? ((line: string) => process.stderr.write(line + '\n'));
  return {
    log(level, event, message, fields) {
      if (RANK[level] < RANK[opts.level]) return;
      if (opts.format === 'text' && opts.take?.(event, message)) return;
      if (opts.format === 'json') write(JSON.stringify({ time: new Date().toISOString(), level, event, message, ...fields }));
      else write(level === 'info' ? message : `${level}: ${message}`);
    },
  };
}

export const silentLogger: Logger = { log() {} };
