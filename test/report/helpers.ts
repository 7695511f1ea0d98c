import { expect } from 'vitest';
import type { LakeReportData } from '../../src/report/report.js';

/** The page's data: the JSON block every chart is drawn from. */
export function reportData(html: string): LakeReportData {
  const m = /<script type="application\/json" id="chainlake-report-data">([\s\S]*?)<\/script>/.exec(html);
  expect(m, 'the page has its data block').not.toBeNull();
  return JSON.parse(m![1]!) as LakeReportData;
}
