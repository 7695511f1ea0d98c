// Job files for the scenarios, built against a running simulator: scopes are discovered through the API
// (the same seed gives the same chain, so the same scopes and counts) and taken in a fixed order until the
// wanted number of rows is reached.

import { writeFile } from 'node:fs/promises';
import type { SimInfo } from './simproc.js';

export const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';

export interface Candidate {
  dataset: 'transactions' | 'erc20_transfers' | 'event_logs' | 'internal_transactions' | 'erc721_transfers';
  address: string;
  rows: number;
}

export interface Workload {
  candidates: Candidate[];
  rows: number;
  range: { fromBlock: number; toBlock: number };
}

async function get(info: SimInfo, path: string): Promise<{ count?: string; data: Record<string, unknown>[] }> {
  const res = await fetch(info.mainnet + path, { headers: { 'api-key': info.apiKey } });
  if (res.status !== 200) throw new Error(`bench: HTTP ${res.status} for ${path}`);
  return ((await res.json()) as { results: { count?: string; data: Record<string, unknown>[] } }).results;
}

const listPath = (c: Omit<Candidate, 'rows'>): string => {
  switch (c.dataset) {
    case 'transactions':
      return `/v1/accounts/${c.address}/transactions?`;
    case 'erc20_transfers':
      return `/v1/accounts/${c.address}/token-transfer/erc20?`;
    case 'erc721_transfers':
      return `/v1/accounts/${c.address}/token-transfer/erc721?`;
    case 'internal_transactions':
      return `/v1/accounts/${c.address}/internal-transactions?`;
    case 'event_logs':
      return `/v1/event-logs?address=${c.address}&topic_0=${TRANSFER_TOPIC}&`;
  }
};

export async function headOf(info: SimInfo): Promise<number> {
  const res = await fetch(info.mainnet + '/v1/blocks/latest', { headers: { 'api-key': info.apiKey } });
  return Number(((await res.json()) as { results: { data: { block_number: string } } }).results.data.block_number);
}

async function countOf(info: SimInfo, c: Omit<Candidate, 'rows'>, range: Workload['range']): Promise<number> {
  const [start, end] = c.dataset === 'event_logs' ? ['start_block', 'end_block'] : ['startBlock', 'endBlock'];
  const r = await get(info, `${listPath(c)}limit=1&${start}=${range.fromBlock}&${end}=${range.toBlock}`);
  return Number(r.count);
}

/** The ERC-20 tokens the whale trades, sorted: busy token contracts with ~70k transactions and logs each. */
async function tokensOf(info: SimInfo): Promise<string[]> {
  const seen = new Set<string>();
  for (let offset = 0; offset < 5000; offset += 1000) {
    const r = await get(info, `/v1/accounts/${info.examples.whale}/token-transfer/erc20?limit=1000&offset=${offset}`);
    for (const e of r.data) seen.add(String(e.token_address).toLowerCase());
  }
  return [...seen].sort();
}

/**
 * The candidate scopes in the order they are taken: the three datasets of the end-to-end scenario
 * interleaved (so any prefix mixes them), then the bigger listings that only the 5M-row export needs.
 */
async function candidateOrder(info: SimInfo): Promise<Omit<Candidate, 'rows'>[]> {
  const tokens = await tokensOf(info);
  const out: Omit<Candidate, 'rows'>[] = [];
  tokens.forEach((t, i) => {
    out.push({ dataset: 'transactions', address: t }, { dataset: 'event_logs', address: t });
    if (i === 0) out.push({ dataset: 'erc20_transfers', address: info.examples.whale });
  });
  for (const p of [...info.examples.pools].sort()) out.push({ dataset: 'transactions', address: p });
  out.push({ dataset: 'transactions', address: info.examples.whale });
  for (const p of [...info.examples.pools].sort()) out.push({ dataset: 'internal_transactions', address: p });
  out.push({ dataset: 'internal_transactions', address: info.examples.whale }, { dataset: 'erc721_transfers', address: info.examples.whale });
  out.push(
    { dataset: 'event_logs', address: info.examples.erc721Token },
    { dataset: 'transactions', address: info.examples.erc721Token },
    { dataset: 'erc721_transfers', address: info.examples.nftHolder },
  );
  for (const a of [...info.examples.addresses].sort()) out.push({ dataset: 'transactions', address: a }, { dataset: 'erc20_transfers', address: a });
  for (const t of tokens) out.push({ dataset: 'internal_transactions', address: t });
  return out;
}

/** Scopes in candidate order until `rows` is reached, over the whole chain up to its head or its last blocks. */
export async function buildWorkload(info: SimInfo, rows: number, only?: Candidate['dataset'][], lastBlocks?: number): Promise<Workload> {
  const head = await headOf(info);
  const range = { fromBlock: lastBlocks ? Math.max(0, head - lastBlocks + 1) : 0, toBlock: head };
  const picked: Candidate[] = [];
  let total = 0;
  for (const c of await candidateOrder(info)) {
    if (total >= rows) break;
    if (only && !only.includes(c.dataset)) continue;
    const n = await countOf(info, c, range);
    if (n === 0) continue;
    picked.push({ ...c, rows: n });
    total += n;
  }
  if (total < rows) throw new Error(`bench: the simulator offers only ${total} rows for a workload of ${rows}; use a larger --scale`);
  return { candidates: picked, rows: total, range };
}

/** One scope's rows over the last blocks before the head: the block range is widened until it holds `rows`. */
export async function rangeWorkload(info: SimInfo, c: Omit<Candidate, 'rows'>, rows: number): Promise<Workload> {
  const head = await headOf(info);
  let width = 1000;
  for (;;) {
    const range = { fromBlock: Math.max(0, head - width + 1), toBlock: head };
    const n = await countOf(info, c, range);
    if (n >= rows || range.fromBlock === 0) return { candidates: [{ ...c, rows: n }], rows: n, range };
    width = Math.ceil(width * Math.min(8, Math.max(1.05, (rows / Math.max(1, n)) * 1.02)));
  }
}

export interface JobOptions {
  lake: string;
  concurrency?: number;
  rps?: number;
  pageSize?: number;
  commitEveryRows?: number;
  /** More job keys (e.g. `decode`). */
  extra?: Record<string, unknown>;
}

/** A job file (target api: the simulator in its own process) for a workload. */
export function jobDoc(info: SimInfo, w: Workload, opts: JobOptions): Record<string, unknown> {
  const datasets: Record<string, Record<string, unknown>> = {};
  for (const c of w.candidates) {
    const spec = (datasets[c.dataset] ??= {});
    if (c.dataset === 'event_logs') ((spec.contracts ??= []) as unknown[]).push({ address: c.address, topics: [TRANSFER_TOPIC] });
    else ((spec.addresses ??= []) as unknown[]).push(c.address);
  }
  return {
    name: 'bench',
    network: 'mainnet',
    target: 'api',
    endpoints: { mainnet: info.mainnet },
    apiKey: info.apiKey,
    lake: opts.lake,
    range: w.range,
    ...(opts.concurrency ? { concurrency: opts.concurrency } : {}),
    ...(opts.rps ? { rps: opts.rps } : {}),
    ...(opts.pageSize ? { pageSize: opts.pageSize } : {}),
    ...(opts.commitEveryRows ? { commit: { everyRows: opts.commitEveryRows } } : {}),
    datasets,
    ...opts.extra,
  };
}

export async function writeJob(file: string, doc: Record<string, unknown>): Promise<void> {
  await writeFile(file, JSON.stringify(doc, null, 2));
}

export const describeWorkload = (w: Workload): string => {
  const per = new Map<string, { scopes: number; rows: number }>();
  for (const c of w.candidates) {
    const p = per.get(c.dataset) ?? { scopes: 0, rows: 0 };
    p.scopes++;
    p.rows += c.rows;
    per.set(c.dataset, p);
  }
  return [...per].map(([d, p]) => `${d} ${p.scopes}×(${p.rows})`).join(', ');
};
