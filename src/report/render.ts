/**
 * The report's data as one self-contained HTML page: inline CSS, charts as inline SVG drawn here, no script and
 * nothing fetched when it is viewed (a page mailed to a colleague opens the same offline). Every chart mark
 * carries what it plots as `data-*` attributes, and the whole data is in the page as JSON
 * (`#chainlake-report-data`): a program (or a test) reads exactly what is drawn.
 */
import type { CoverageLane, CoverageWindow, LakeReportData } from './gather.js';

/** Colours of the window statuses the ledger knows; any other status is drawn in {@link OTHER_STATUS}. */
export const STATUS_COLOURS: Readonly<Record<string, string>> = {
  committed: '#2f9e5b',
  verified: '#1f6fb2',
  provisional: '#e0a31a',
  failed: '#d64545',
};
export const OTHER_STATUS = '#8d959e';
const RUN_COLOURS: Readonly<Record<string, string>> = {
  complete: '#2f9e5b',
  compact: '#1f6fb2',
  partial: '#e0a31a',
  interrupted: '#e0a31a',
  quota_reached: '#e0a31a',
  running: '#8d959e',
  failed: '#d64545',
  abandoned: '#d64545',
};
/** Later statuses draw over earlier ones: a failed window fetched again shows as covered, an uncovered one as red. */
const DRAW_ORDER = ['failed', 'provisional', 'committed', 'verified'];

const WIDTH = 960;
const LABEL = 260;
const PLOT = WIDTH - LABEL - 10;
const LANE = 16;
/** Lanes drawn per dataset, and window marks per lane before neighbours of one status are drawn as one. */
const MAX_LANES = 200;
const MAX_MARKS = 2000;

/** Text for HTML content and attribute values. */
export function esc(s: unknown): string {
  return String(s ?? '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** JSON inside `<script>`: nothing in it can close the element or start a comment. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

const int = (n: number | null | undefined): string => (n === null || n === undefined ? '' : n.toLocaleString('en-US'));
export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}
function duration(ms: number | null): string {
  if (ms === null) return '';
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 120) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return m < 120 ? `${m} min ${Math.round(s % 60)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}
const colourOf = (status: string, palette: Readonly<Record<string, string>>): string => palette[status] ?? OTHER_STATUS;
const attrs = (a: Record<string, string | number | null | undefined>): string =>
  Object.entries(a)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => ` ${k}="${esc(v)}"`)
    .join('');
const round = (n: number): number => Math.round(n * 100) / 100;

function legend(entries: [string, string][]): string {
  return `<p class="legend">${entries.map(([name, colour]) => `<span><i style="background:${esc(colour)}"></i>${esc(name)}</span>`).join('')}</p>`;
}

function table(head: string[], rows: (string | number | null)[][], numeric: boolean[] = []): string {
  return `<table><thead><tr>${head.map((h, i) => `<th${numeric[i] ? ' class="n"' : ''}>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows
    .map((r) => `<tr>${r.map((c, i) => `<td${numeric[i] ? ' class="n"' : ''}>${esc(c)}</td>`).join('')}</tr>`)
    .join('')}</tbody></table>`;
}

/** A position on a lane's axis: the block, or the time in ms. */
const position = (lane: CoverageLane, v: number | string): number => (lane.axis === 'block' ? Number(v) : Date.parse(String(v)));

/** Neighbouring windows of one status as one mark, for a lane with more windows than a chart can show apart. */
function marksOf(lane: CoverageLane): { w: CoverageWindow; count: number }[] {
  const ws = [...lane.windows].sort((a, b) => position(lane, a.from) - position(lane, b.from));
  if (ws.length <= MAX_MARKS) return ws.map((w) => ({ w, count: 1 }));
  const out: { w: CoverageWindow; count: number }[] = [];
  for (const w of ws) {
    const prev = out.at(-1);
    if (prev && prev.w.status === w.status && position(lane, w.from) <= position(lane, prev.w.to) + 1) {
      if (position(lane, w.to) > position(lane, prev.w.to)) prev.w = { ...prev.w, to: w.to };
      prev.count++;
    } else out.push({ w: { ...w }, count: 1 });
  }
  return out;
}

function coverageChart(lanes: CoverageLane[]): string {
  const shown = lanes.slice(0, MAX_LANES);
  const axis = shown[0]!.axis;
  let lo = Infinity;
  let hi = -Infinity;
  for (const l of shown)
    for (const w of l.windows) {
      lo = Math.min(lo, position(l, w.from));
      hi = Math.max(hi, position(l, w.to));
    }
  if (!Number.isFinite(lo)) [lo, hi] = [0, 1];
  const span = Math.max(1, hi - lo + (axis === 'block' ? 1 : 0));
  const x = (v: number) => LABEL + ((v - lo) / span) * PLOT;
  const width = (from: number, to: number) => Math.max(1.5, ((to - from + (axis === 'block' ? 1 : 0)) / span) * PLOT);
  const height = shown.length * (LANE + 4) + 24;
  const parts: string[] = [];
  shown.forEach((lane, i) => {
    const y = i * (LANE + 4);
    parts.push(
      `<text class="lane" x="${LABEL - 6}" y="${y + LANE - 4}" text-anchor="end">${esc(lane.scope.length > 36 ? `${lane.scope.slice(0, 35)}…` : lane.scope)}<title>${esc(lane.scope)}</title></text>`,
      `<rect class="lane-bg" x="${LABEL}" y="${y}" width="${PLOT}" height="${LANE}"/>`,
    );
    for (const g of lane.gaps) {
      parts.push(
        `<rect class="gap"${attrs({ 'data-dataset': lane.dataset, 'data-network': lane.network, 'data-scope': lane.scope, 'data-from': g.from, 'data-to': g.to })} x="${round(x(g.from))}" y="${y}" width="${round(width(g.from, g.to))}" height="${LANE}"><title>gap: blocks ${esc(int(g.from))}–${esc(int(g.to))} not covered</title></rect>`,
      );
    }
    const marks = marksOf(lane);
    const rank = (s: string) => DRAW_ORDER.indexOf(s);
    marks.sort((a, b) => rank(a.w.status) - rank(b.w.status));
    for (const { w, count } of marks) {
      const from = position(lane, w.from);
      const to = position(lane, w.to);
      const what = lane.axis === 'block' ? `blocks ${int(Number(w.from))}–${int(Number(w.to))}` : `${String(w.from)} – ${String(w.to)}`;
      const title = `${w.status}: ${what}${count > 1 ? ` (${count} windows)` : ''}; run ${w.run_id}${w.rows !== null ? `; ${int(w.rows)} rows` : ''}${w.error ? `; ${w.error}` : ''}`;
      parts.push(
        `<rect class="window"${attrs({
          'data-dataset': lane.dataset,
          'data-network': lane.network,
          'data-scope': lane.scope,
          'data-run': w.run_id,
          'data-status': w.status,
          'data-from': w.from,
          'data-to': w.to,
          'data-windows': count > 1 ? count : undefined,
        })} x="${round(x(from))}" y="${y + 2}" width="${round(width(from, to))}" height="${LANE - 4}" fill="${esc(colourOf(w.status, STATUS_COLOURS))}"><title>${esc(title)}</title></rect>`,
      );
    }
  });
  const label = (v: number) => (axis === 'block' ? `block ${int(v)}` : new Date(v).toISOString().slice(0, 16).replace('T', ' '));
  const base = shown.length * (LANE + 4) + 14;
  parts.push(
    `<text class="tick" x="${LABEL}" y="${base}">${esc(label(lo))}</text>`,
    `<text class="tick" x="${LABEL + PLOT}" y="${base}" text-anchor="end">${esc(label(axis === 'block' ? hi : hi))}</text>`,
  );
  const more = lanes.length > shown.length ? `<p class="note">${int(lanes.length - shown.length)} more scopes not drawn (the JSON data has them all).</p>` : '';
  return `<svg class="coverage" data-axis="${axis}" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" role="img">${parts.join('')}</svg>${more}`;
}

function coverageSection(d: LakeReportData): string {
  if (d.coverage.length === 0) return '<p class="empty">No windows yet: run a job.</p>';
  const groups = new Map<string, CoverageLane[]>();
  for (const lane of d.coverage) {
    const key = `${lane.dataset} · ${lane.network} · ${lane.axis}`;
    groups.set(key, [...(groups.get(key) ?? []), lane]);
  }
  const statuses = [...new Set(d.coverage.flatMap((l) => l.windows.map((w) => w.status)))];
  const known = Object.keys(STATUS_COLOURS).filter((s) => statuses.includes(s) || s === 'committed' || s === 'failed');
  const others = statuses.filter((s) => !(s in STATUS_COLOURS));
  return (
    legend([...known.map((s): [string, string] => [s, STATUS_COLOURS[s]!]), ...others.map((s): [string, string] => [s, OTHER_STATUS]), ['gap', '#f6c7c7']]) +
    [...groups.entries()]
      .map(([key, lanes]) => {
        const l = lanes[0]!;
        const axis = l.axis === 'block' ? 'by block' : 'by time of the run that fetched it (the dataset has no block range)';
        return `<div class="dataset" data-dataset="${esc(l.dataset)}" data-network="${esc(l.network)}"><h3>${esc(key.split(' · ').slice(0, 2).join(' · '))} <small>${esc(axis)}, ${int(lanes.length)} scope${lanes.length === 1 ? '' : 's'}</small></h3>${coverageChart(lanes)}</div>`;
      })
      .join('')
  );
}

/** A bar chart of values over categories (runs, days): one `rect` per point, its data in `data-*`. */
function bars(
  cls: string,
  points: { value: number; colour: string; data: Record<string, string | number | null>; title: string }[],
  opts: { height?: number; line?: { value: number; label: string; cls: string } } = {},
): string {
  const h = opts.height ?? 160;
  const top = 14;
  const plotH = h - top - 18;
  const left = 60;
  const plotW = WIDTH - left - 10;
  const max = Math.max(1, ...points.map((p) => p.value), opts.line?.value ?? 0);
  const step = plotW / Math.max(1, points.length);
  const bw = Math.max(1, step * 0.8);
  const parts = [
    `<line class="axis" x1="${left}" y1="${top + plotH}" x2="${left + plotW}" y2="${top + plotH}"/>`,
    `<text class="tick" x="${left - 4}" y="${top + 4}" text-anchor="end">${esc(int(max))}</text>`,
    `<text class="tick" x="${left - 4}" y="${top + plotH}" text-anchor="end">0</text>`,
  ];
  points.forEach((p, i) => {
    // A zero (a run that fetched nothing) is drawn as a stub: the run is there, in its status's colour.
    const bh = Math.max(2, (p.value / max) * plotH);
    parts.push(
      `<rect class="${esc(cls)}"${attrs(Object.fromEntries(Object.entries(p.data).map(([k, v]) => [`data-${k}`, v ?? ''])))} x="${round(left + i * step + (step - bw) / 2)}" y="${round(top + plotH - bh)}" width="${round(bw)}" height="${round(bh)}" fill="${esc(p.colour)}"><title>${esc(p.title)}</title></rect>`,
    );
  });
  if (points.length) {
    const first = points[0]!.data;
    const last = points.at(-1)!.data;
    const name = (d: Record<string, unknown>) => String(d.day ?? d.started ?? d.run ?? '');
    parts.push(
      `<text class="tick" x="${left}" y="${h - 2}">${esc(name(first))}</text>`,
      `<text class="tick" x="${left + plotW}" y="${h - 2}" text-anchor="end">${esc(name(last))}</text>`,
    );
  }
  if (opts.line) {
    const y = round(top + plotH - (opts.line.value / max) * plotH);
    parts.push(
      `<line class="${esc(opts.line.cls)}" data-value="${opts.line.value}" x1="${left}" y1="${y}" x2="${left + plotW}" y2="${y}"/>`,
      `<text class="tick limit" x="${left + plotW}" y="${y - 3}" text-anchor="end">${esc(opts.line.label)}</text>`,
    );
  }
  return `<svg class="bars ${esc(cls)}" width="${WIDTH}" height="${h}" viewBox="0 0 ${WIDTH} ${h}" role="img">${parts.join('')}</svg>`;
}

function runsSection(d: LakeReportData): string {
  if (d.runs.length === 0) return '<p class="empty">No run yet.</p>';
  const chart = bars(
    'run',
    d.runs.map((r) => ({
      value: r.rows ?? 0,
      colour: colourOf(r.status, RUN_COLOURS),
      data: { run: r.run_id, job: r.job, status: r.status, started: r.started_at, rows: r.rows, requests: r.requests, 'duration-ms': r.duration_ms },
      title: `${r.job} ${r.run_id}: ${r.status}; ${int(r.rows)} rows, ${int(r.requests)} requests, ${duration(r.duration_ms)}`,
    })),
  );
  const statuses = [...new Set(d.runs.map((r) => r.status))];
  const rows = [...d.runs]
    .reverse()
    .map((r) => [r.started_at, r.job, r.run_id, r.status, int(r.rows), int(r.requests), int(r.rejects), int(r.windows_failed), duration(r.duration_ms)]);
  return `<p class="note">Rows per run (bar height), coloured by the run's status; oldest on the left.</p>${legend(statuses.map((s) => [s, colourOf(s, RUN_COLOURS)]))}${chart}<details><summary>The runs as a table (newest first)</summary>${table(
    ['started', 'job', 'run', 'status', 'rows', 'requests', 'rejects', 'failed windows', 'duration'],
    rows,
    [false, false, false, false, true, true, true, true, true],
  )}</details>`;
}

function requestsSection(d: LakeReportData): string {
  const r = d.requests;
  if (r.days.length === 0) return '<p class="empty">No requests recorded yet.</p>';
  const source =
    r.source === 'ledger'
      ? "from the daily quota's ledger (request_usage)"
      : "from the runs' own counts, by the UTC day each run started (no quota ledger yet)";
  const quota =
    r.quota === null ? "No dailyRequestQuota is set in the last runs' jobs." : `dailyRequestQuota: ${int(r.quota)} requests per UTC day (the line).`;
  return `<p class="note">Requests per UTC day, ${esc(source)}. ${esc(quota)}</p>${bars(
    'requests-day',
    r.days.map((x) => ({
      value: x.requests,
      colour: r.quota !== null && x.requests >= r.quota ? STATUS_COLOURS.failed! : '#4a7fb5',
      data: { day: x.day, requests: x.requests },
      title: `${x.day}: ${int(x.requests)} requests${r.quota !== null ? ` of ${int(r.quota)}` : ''}`,
    })),
    r.quota === null ? {} : { line: { value: r.quota, label: `quota ${int(r.quota)}`, cls: 'quota' } },
  )}`;
}

function rowsPerDaySection(d: LakeReportData): string {
  if (d.rows_per_day.length === 0) return '<p class="empty">No rows yet.</p>';
  const groups = new Map<string, LakeReportData['rows_per_day']>();
  for (const r of d.rows_per_day) {
    const key = `${r.dataset} · ${r.network}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  return `<p class="note">Rows in the current snapshot per day of their partition (the block's, point's or snapshot's UTC date).</p>${[...groups.entries()]
    .map(
      ([key, days]) =>
        `<h3>${esc(key)} <small>${int(days.reduce((n, x) => n + x.rows, 0))} rows over ${int(days.length)} days</small></h3>${bars(
          'rows-day',
          days.map((x) => ({
            value: x.rows,
            colour: '#4a7fb5',
            data: { dataset: x.dataset, network: x.network, day: x.day, rows: x.rows },
            title: `${x.day}: ${int(x.rows)} rows`,
          })),
          { height: 110 },
        )}`,
    )
    .join('')}`;
}

function rejectsSection(d: LakeReportData): string {
  if (d.rejects.length === 0) return '<p class="empty">No rejects: every value the APIs returned converted.</p>';
  const max = Math.max(...d.rejects.map((r) => r.rows));
  return `<p class="note">Rows set aside in _rejects, by dataset, field and reason (the most frequent first).</p><table><thead><tr><th>dataset</th><th>field</th><th>reason</th><th class="n">rows</th><th></th></tr></thead><tbody>${d.rejects
    .map(
      (r) =>
        `<tr class="reject"${attrs({ 'data-dataset': r.dataset, 'data-field': r.field, 'data-reason': r.reason, 'data-rows': r.rows })}><td>${esc(r.dataset)}</td><td>${esc(r.field)}</td><td>${esc(r.reason)}</td><td class="n">${esc(int(r.rows))}</td><td><svg width="160" height="10"><rect x="0" y="0" width="${round((r.rows / max) * 160)}" height="10" fill="${STATUS_COLOURS.failed}"/></svg></td></tr>`,
    )
    .join('')}</tbody></table>`;
}

function snapshotsSection(d: LakeReportData): string {
  const s = d.snapshots;
  if (s.count === 0) return '<p class="empty">No snapshot yet.</p>';
  const old =
    s.old_files === 0
      ? 'No file is held by old snapshots only.'
      : `${int(s.old_files)} files (${bytes(s.old_bytes)}) are listed by old snapshots only: they stay on disk until \`chainlake maintain\` expires those snapshots.`;
  return `<p class="headline-line"><span class="snapshots"${attrs({ 'data-count': s.count, 'data-current': s.current, 'data-old-bytes': s.old_bytes, 'data-old-files': s.old_files })}>${esc(
    `${int(s.count)} snapshots; the current one (${s.current}) lists ${bytes(s.current_bytes)}. ${old}`,
  )}</span></p><details><summary>The last ${int(s.list.length)} snapshots</summary>${table(
    ['snapshot', 'time', 'commit', 'files added', 'bytes added'],
    s.list.map((x) => [x.snapshot_id, x.snapshot_time, x.commit_message, int(x.files_added), bytes(x.bytes_added)]),
    [true, false, false, true, true],
  )}</details>`;
}

function headline(d: LakeReportData): string {
  const h = d.headline;
  const card = (label: string, value: string, cls = '') =>
    `<div class="card ${cls}"><div class="v">${esc(value)}</div><div class="l">${esc(label)}</div></div>`;
  return `<div class="status ${h.ok ? 'ok' : 'bad'}" id="summary">${esc(h.summary)}</div><div class="cards">${[
    card('datasets', int(h.datasets)),
    card('rows', int(h.rows)),
    card('on disk (current snapshot)', bytes(h.bytes)),
    card('last run', h.last_run ? `${h.last_run.status}` : 'none', h.last_run && h.last_run.status !== 'complete' ? 'warn' : ''),
    card('failed windows (all runs)', int(h.failed_windows), h.failed_windows ? 'warn' : ''),
    card('gaps', int(h.gaps), h.gaps ? 'warn' : ''),
  ].join('')}</div>${
    d.datasets.length
      ? table(
          ['dataset', 'network', 'partitions', 'files', 'rows', 'bytes', 'min block', 'max block'],
          d.datasets.map((x) => [x.dataset, x.network, int(x.partitions), int(x.files), int(x.rows), bytes(x.bytes), int(x.min_block), int(x.max_block)]),
          [false, false, true, true, true, true, true, true],
        )
      : ''
  }`;
}

const CSS = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2430}
header{background:#1d2430;color:#fff;padding:16px 28px}header h1{margin:0;font-size:20px}header p{margin:4px 0 0;color:#b9c2cf;font-size:13px}
main{padding:8px 28px 40px;max-width:1000px}section{background:#fff;border:1px solid #dfe3e8;border-radius:8px;padding:12px 18px;margin:16px 0}
h2{font-size:16px;margin:4px 0 8px}h3{font-size:14px;margin:14px 0 4px}h3 small{color:#66707c;font-weight:normal}
.status{font-size:16px;font-weight:600;padding:8px 12px;border-radius:6px;margin:6px 0 10px}.status.ok{background:#e3f4ea;color:#1e6b3d}.status.bad{background:#fde8e8;color:#9b1c1c}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin-bottom:10px}.card{border:1px solid #dfe3e8;border-radius:6px;padding:6px 12px;min-width:110px}
.card .v{font-size:18px;font-weight:600}.card .l{color:#66707c;font-size:12px}.card.warn .v{color:#b42318}
table{border-collapse:collapse;font-size:13px;margin:6px 0}th,td{padding:3px 10px 3px 0;text-align:left;border-bottom:1px solid #eef0f3;vertical-align:top}
th{color:#66707c;font-weight:600}.n{text-align:right}.note,.empty{color:#66707c;margin:4px 0}
.legend span{margin-right:14px;font-size:12px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px;vertical-align:-1px}
svg text{font-size:11px;fill:#3d4654}svg .tick{fill:#66707c}svg .limit{fill:#b42318}.lane-bg{fill:#f0f2f5}.gap{fill:#f6c7c7;stroke:#d64545;stroke-dasharray:2 2}
.axis{stroke:#9aa3ae}.quota{stroke:#b42318;stroke-width:1.5;stroke-dasharray:5 3}details summary{cursor:pointer;color:#1f6fb2;margin:6px 0}
`;

/** The report as one HTML page. */
export function renderReport(d: LakeReportData): string {
  const title = `chainlake report: ${d.lake}`;
  const section = (id: string, name: string, body: string) => `<section id="${id}"><h2>${esc(name)}</h2>${body}</section>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title><style>${CSS}</style></head>
<body><header><h1>${esc(title)}</h1><p>${esc(d.kind === 'local' ? 'a local lake' : 'a distributed lake')}, as of ${esc(d.generated_at)}</p></header><main>
${section('headline', 'The lake', headline(d))}
${section('coverage', 'Coverage: which windows of which scopes are in the lake', coverageSection(d))}
${section('runs', 'Runs', runsSection(d))}
${section('requests', 'Requests per day', requestsSection(d))}
${section('rows-per-day', 'Rows per day', rowsPerDaySection(d))}
${section('rejects', 'Rejects', rejectsSection(d))}
${section('snapshots', 'Snapshots', snapshotsSection(d))}
</main>
<script type="application/json" id="chainlake-report-data">${scriptJson(d)}</script>
</body></html>
`;
}

/** A page of links to reports (a scheduler whose jobs write several lakes serves one report per lake). */
export function renderIndex(title: string, links: { href: string; label: string }[]): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title><style>${CSS}</style></head>
<body><header><h1>${esc(title)}</h1></header><main><section><ul>${links.map((l) => `<li><a href="${esc(l.href)}">${esc(l.label)}</a></li>`).join('')}</ul></section></main></body></html>
`;
}
