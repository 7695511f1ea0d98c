import { randomBytes } from 'node:crypto';

/** Id of a maintenance command's commit, shaped like a run id so it sorts with them. */
export function newMaintenanceId(what: string): string {
  const ts = new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  return `${ts}-${what}-${randomBytes(3).toString('hex')}`;
}
