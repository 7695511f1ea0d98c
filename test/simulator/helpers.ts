import { request } from 'undici';
import type { RunningSimulator } from '../../src/simulator/index.js';

export interface Got { status: number; headers: Record<string, string | string[] | undefined>; text: string; json: any }

export async function get(url: string, headers: Record<string, string> = {}): Promise<Got> {
  const r = await request(url, { headers, headersTimeout: 20_000, bodyTimeout: 20_000 });
  const text = await r.body.text();
  let json: unknown = undefined;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.statusCode, headers: r.headers, text, json };
}

export async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Got> {
  const r = await request(url, {
    method: 'POST', headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body), headersTimeout: 20_000, bodyTimeout: 20_000,
  });
  const text = await r.body.text();
  let json: unknown = undefined;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
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
