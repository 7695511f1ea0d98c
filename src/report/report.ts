/**
 * `chainlake report`: a lake (local or distributed) as one self-contained HTML page. Gathering (gather.ts) and
 * drawing (render.ts) are apart, so the page's data is exactly what its JSON block holds.
 */
import { gatherReport, type ReportTarget } from './gather.js';
import { renderReport } from './render.js';

export type { LakeReportData, ReportTarget } from './gather.js';
export { gatherReport } from './gather.js';
export { renderIndex, renderReport } from './render.js';

/** The report page of a lake, as HTML text. */
export async function lakeReportHtml(target: ReportTarget): Promise<string> {
  return renderReport(await gatherReport(target));
}
