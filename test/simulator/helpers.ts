import { request } from 'undici';
import { expect } from 'vitest';
import type { RunningSimulator } from '../../src/simulator/index.js';

export interface Got {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any;
}

export async function get(url: string, headers: Record<string, string> = {}): Promise<Got> {
  const r = await request(url, { headers, headersTimeout: 20_000, bodyTimeout: 20_000 });
  const text = await r.body.text();
  let json: unknown = undefined;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: r.statusCode, headers: r.headers, text, json };
}

export async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Got> {
  const r = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headersTimeout: 20_000,
    bodyTimeout: 20_000,
  });
  const text = await r.body.text();
  let json: unknown = undefined;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: r.statusCode, headers: r.headers, text, json };
}

/** GET an explorer path with the api key; asserts nothing. */
export function api(sim: RunningSimulator, path: string, network: 'mainnet' | 'testnet' | 'testnetAlt' = 'mainnet'): Promise<Got> {
  return get(sim.urls[network] + path, { 'api-key': sim.apiKey });
}

export function expectStringOrNull(v: unknown): boolean {
  return v === null || typeof v === 'string';
}

export const ISO_SECONDS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;
export const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
export const HASH = /^0x[0-9a-fA-F]{64}$/;
export const UINT = /^[0-9]+$/;

const INTERNAL_FIELDS = [
  'timestamp',
  'sender',
  'receiver',
  'value',
  'status',
  'message',
  'transaction_hash',
  'block_number',
  'contract_address',
  'trace_address',
  'trace_type',
  'sub_traces',
  'transaction_index',
  'gas_used',
  'gas_limit',
  'external_receiver',
];

export function checkInternal(e: any, withInput = false): void {
  expect(Object.keys(e)).toEqual(withInput ? [...INTERNAL_FIELDS, 'input'] : INTERNAL_FIELDS);
  for (const f of INTERNAL_FIELDS) {
    if (f === 'trace_address') {
      expect(Array.isArray(e[f])).toBe(true);
      for (const x of e[f]) expect(x).toMatch(UINT);
    } else if (f === 'external_receiver') expect(typeof e[f]).toBe('boolean');
    else if (['message', 'contract_address', 'sub_traces'].includes(f)) expect(e[f] === null || typeof e[f] === 'string').toBe(true);
    else expect(typeof e[f], f).toBe('string');
  }
  expect(['call', 'delegatecall', 'codecall', 'staticcall', 'selfdestruct']).toContain(e.trace_type);
  expect(e.timestamp).toMatch(ISO_SECONDS);
  expect(e.transaction_hash).toMatch(HASH);
}
