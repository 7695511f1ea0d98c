// What a scenario reports: measured figures, the references measured beside them, and its targets.

export type Op = '>=' | '<=' | '<' | '>';

export interface Target {
  name: string;
  value: number;
  op: Op;
  threshold: number;
  unit: string;
  /** Quick mode checks that the bench works, not timings: its targets are shown but not judged. */
  pass: boolean | null;
}

export interface ScenarioResult {
  scenario: string;
  title: string;
  seconds: number;
  /** Figures measured for chainlake. */
  measured: Record<string, number | string>;
  /** Figures measured for the references in the same run. */
  references: Record<string, number | string>;
  targets: Target[];
  notes: string[];
}

export interface Context {
  quick: boolean;
  /** A fresh temporary folder for this scenario. */
  tmp: string;
  log: (message: string) => void;
}

export function target(name: string, value: number, op: Op, threshold: number, unit: string, quick: boolean): Target {
  const ok = op === '>=' ? value >= threshold : op === '<=' ? value <= threshold : op === '<' ? value < threshold : value > threshold;
  return { name, value, op, threshold, unit, pass: quick ? null : ok };
}

const fmt = (v: number | string): string => {
  if (typeof v === 'string') return v;
  if (!Number.isFinite(v)) return String(v);
  if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString('en-US');
  if (Math.abs(v) >= 10) return v.toFixed(1);
  return v.toFixed(3);
};

export function formatTable(results: ScenarioResult[]): string {
  const rows: string[][] = [['scenario', 'target', 'measured', 'required', 'result']];
  for (const r of results) {
    for (const t of r.targets) {
      rows.push([
        r.scenario,
        t.name,
        `${fmt(t.value)} ${t.unit}`.trim(),
        `${t.op} ${fmt(t.threshold)} ${t.unit}`.trim(),
        t.pass === null ? 'n/a (quick)' : t.pass ? 'PASS' : 'FAIL',
      ]);
    }
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const line = (r: string[]): string => r.map((c, i) => c.padEnd(widths[i]!)).join('  ');
  const out = [line(rows[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)];
  return out.join('\n');
}

export function formatDetails(r: ScenarioResult): string {
  const lines = [`== ${r.scenario}: ${r.title} (${r.seconds.toFixed(1)} s)`];
  for (const [k, v] of Object.entries(r.measured)) lines.push(`   chainlake  ${k}: ${fmt(v)}`);
  for (const [k, v] of Object.entries(r.references)) lines.push(`   reference  ${k}: ${fmt(v)}`);
  for (const n of r.notes) lines.push(`   note: ${n}`);
  return lines.join('\n');
}
