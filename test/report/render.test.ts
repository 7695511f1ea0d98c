import { describe, expect, it } from 'vitest';
import { renderReport, type LakeReportData } from '../../src/report/report.js';
import { OTHER_STATUS, STATUS_COLOURS } from '../../src/report/render.js';
import { reportData } from './helpers.js';

// The page drawn from the data `gather` reads (test/report/report.test.ts reads it from real lakes): what text
// from a lake does to the page, statuses the ledger may hold tomorrow, and a scope of very many windows.

const HOSTILE = `</script><script>alert("x")</script><!-- & 'quoted'`;

function data(windows: LakeReportData['coverage'][number]['windows'], gaps: { from: number; to: number }[] = []): LakeReportData {
  return {
    lake: `/lakes/${HOSTILE}`,
    kind: 'local',
    generated_at: '2026-11-27T00:00:00.000Z',
    headline: {
      datasets: 1,
      rows: 10,
      bytes: 100,
      last_run: { run_id: 'r1', job: HOSTILE, status: 'complete', started_at: '2026-11-27T00:00:00.000Z' },
      failed_windows: 0,
      gaps: gaps.length,
      missing_files: 0,
      summary: 'all well',
      ok: true,
    },
    datasets: [],
    coverage: [{ dataset: 'transactions', network: 'mainnet', scope: `address=${HOSTILE}`, axis: 'block', windows, gaps }],
    runs: [],
    requests: { source: 'runs', quota: null, days: [] },
    rows_per_day: [],
    rejects: [{ dataset: 'transactions', field: 'value', reason: HOSTILE, rows: 3 }],
    snapshots: { count: 0, current: null, current_bytes: 0, old_files: 0, old_bytes: 0, list: [] },
  };
}

const marks = (html: string) =>
  [...html.matchAll(/<rect class="window"([^>]*)>/g)].map((m) => Object.fromEntries([...m[1]!.matchAll(/ ([\w-]+)="([^"]*)"/g)].map((a) => [a[1]!, a[2]!])));

describe('the report page (render)', () => {
  it('escapes every string from the lake: in text, in attributes and in the JSON block, which reads back whole', () => {
    const d = data([{ run_id: 'r1', from: 0, to: 99, status: 'committed', rows: 10, error: HOSTILE }]);
    const html = renderReport(d);
    expect(html).not.toContain('<script>alert');
    expect(html).not.toContain('<!-- &');
    expect(html.match(/<script/g)).toHaveLength(1);
    expect(html).toContain('&lt;/script&gt;&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;!-- &amp; &#39;quoted&#39;');
    expect(reportData(html)).toEqual(d);
  });

  it('colours the statuses it knows by a fixed palette and any other in a neutral one; gaps are drawn', () => {
    const html = renderReport(
      data(
        [
          { run_id: 'r1', from: 0, to: 99, status: 'committed', rows: 1, error: null },
          { run_id: 'r1', from: 100, to: 199, status: 'provisional', rows: 1, error: null },
          { run_id: 'r1', from: 200, to: 299, status: 'verified', rows: 1, error: null },
          { run_id: 'r1', from: 400, to: 499, status: 'failed', rows: 0, error: 'HTTP 500' },
          { run_id: 'r1', from: 500, to: 599, status: 'reorged', rows: 1, error: null },
        ],
        [{ from: 300, to: 399 }],
      ),
    );
    expect(marks(html).map((m) => [m['data-status'], m.fill])).toEqual([
      ['reorged', OTHER_STATUS],
      ['failed', STATUS_COLOURS.failed],
      ['provisional', STATUS_COLOURS.provisional],
      ['committed', STATUS_COLOURS.committed],
      ['verified', STATUS_COLOURS.verified],
    ]);
    expect(html).toMatch(/<rect class="gap"[^>]* data-from="300" data-to="399"/);
    expect(html).toContain('reorged</span>');
  });

  it('a scope of more windows than a chart can show apart draws neighbours of one status as one mark that counts them', () => {
    const windows = Array.from({ length: 5000 }, (_, i) => ({
      run_id: 'r1',
      from: i * 10,
      to: i * 10 + 9,
      status: i >= 2000 && i < 2003 ? 'failed' : 'committed',
      rows: 1,
      error: null,
    }));
    const m = marks(renderReport(data(windows)));
    expect(m.map((x) => [x['data-status'], x['data-from'], x['data-to'], x['data-windows']])).toEqual([
      ['failed', '20000', '20029', '3'],
      ['committed', '0', '19999', '2000'],
      ['committed', '20030', '49999', '2997'],
    ]);
  });
});
