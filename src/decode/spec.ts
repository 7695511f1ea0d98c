// What to decode (a job's `decode` key, or `chainlake decode`'s options), and how it becomes datasets: the
// standard token events, and any contract's events from the lake's `contracts` dataset (its ABI from #14),
// an ABI file or event signatures.

import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { AbiEvent } from 'viem';
import type { Network } from '../datasets/dataset.js';
import type { DuckDBConnection } from '@duckdb/node-api';
import type { Engine } from '../load/engine.js';
import { literal, literalList } from '../load/sql.js';
import type { LakePaths } from '../load/paths.js';
import { AbiError, eventOfSignature, eventsOfAbi } from './abi.js';
import { eventDataset, snake, STANDARD, STANDARD_GROUPS, type DecodedDataset } from './datasets.js';
import { DecodeSpecError } from './spec-error.js';

export interface ContractDecode {
  /** Lower-case address. */
  address: string;
  /** Names the datasets (`<name>_<event>`); default: the verified contract name, else `c_<address prefix>`. */
  name?: string;
  /** An ABI file (JSON), resolved against the job file's folder. */
  abiFile?: string;
  /** Event signatures as text; used instead of an ABI. */
  signatures?: string[];
  /** Only these events of the ABI (default: all). */
  events?: string[];
}

export interface DecodeSpec {
  /** Standard groups (erc20, erc721, erc1155) or standard dataset names. */
  standard: string[];
  /** Standard events only of these token contracts (lower-case); every contract when absent. */
  tokens?: string[];
  contracts: ContractDecode[];
}

export { DecodeSpecError };

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
type Fail = (where: string, problem: string) => never;
const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

export const STANDARD_CHOICES = [...Object.keys(STANDARD_GROUPS), ...Object.keys(STANDARD)];

/** A `decode` object of a job file (errors through `fail`, naming the key). */
export function parseDecodeSpec(doc: unknown, where: string, fail: Fail, baseDir = '.'): DecodeSpec {
  if (!isObj(doc)) fail(where, 'must be an object like {"standard": ["erc20"], "contracts": [{"address": "0x…"}]}');
  for (const k of Object.keys(doc))
    if (!['standard', 'tokens', 'contracts'].includes(k)) fail(`${where}.${k}`, 'unknown key; expected one of: standard, tokens, contracts');
  const strings = (v: unknown, at: string): string[] => {
    if (!Array.isArray(v) || v.length === 0 || v.some((x) => typeof x !== 'string' || x === '')) fail(at, 'must be a non-empty list of strings');
    return v as string[];
  };
  const addresses = (v: unknown, at: string): string[] =>
    strings(v, at).map((a, i) =>
      ADDRESS.test(a) ? a.toLowerCase() : fail(`${at}[${i}]`, `must be an address (0x + 40 hex digits), got ${JSON.stringify(a)}`),
    );
  const standard = doc.standard === undefined ? [] : strings(doc.standard, `${where}.standard`);
  standard.forEach((s, i) => {
    if (!STANDARD_CHOICES.includes(s))
      fail(`${where}.standard[${i}]`, `unknown standard ${JSON.stringify(s)}; expected one of: ${STANDARD_CHOICES.join(', ')}`);
  });
  const tokens = doc.tokens === undefined ? undefined : addresses(doc.tokens, `${where}.tokens`);
  const contracts: ContractDecode[] = [];
  if (doc.contracts !== undefined) {
    if (!Array.isArray(doc.contracts) || doc.contracts.length === 0)
      fail(`${where}.contracts`, 'must be a non-empty list of {"address", "name"?, "abiFile"?, "signatures"?, "events"?}');
    doc.contracts.forEach((c: unknown, i: number) => {
      const at = `${where}.contracts[${i}]`;
      if (!isObj(c)) fail(at, 'must be an object {"address", "name"?, "abiFile"?, "signatures"?, "events"?}');
      for (const k of Object.keys(c))
        if (!['address', 'name', 'abiFile', 'signatures', 'events'].includes(k))
          fail(`${at}.${k}`, 'unknown key; expected one of: address, name, abiFile, signatures, events');
      if (typeof c.address !== 'string' || !ADDRESS.test(c.address)) fail(`${at}.address`, `must be an address, got ${JSON.stringify(c.address)}`);
      if (c.name !== undefined && (typeof c.name !== 'string' || !/^[A-Za-z][A-Za-z0-9_]*$/.test(c.name)))
        fail(`${at}.name`, 'must be a name of letters, digits and _ (it names the datasets)');
      if (c.abiFile !== undefined && (typeof c.abiFile !== 'string' || c.abiFile === '')) fail(`${at}.abiFile`, 'must be a path');
      if (c.abiFile !== undefined && c.signatures !== undefined) fail(at, 'give abiFile or signatures, not both');
      const signatures = c.signatures === undefined ? undefined : strings(c.signatures, `${at}.signatures`);
      signatures?.forEach((s, j) => {
        try {
          eventOfSignature(s);
        } catch (e) {
          fail(`${at}.signatures[${j}]`, (e as Error).message);
        }
      });
      contracts.push({
        address: c.address.toLowerCase(),
        name: c.name as string | undefined,
        abiFile: c.abiFile === undefined ? undefined : path.resolve(baseDir, c.abiFile as string),
        signatures,
        events: c.events === undefined ? undefined : strings(c.events, `${at}.events`),
      });
    });
  }
  if (standard.length === 0 && contracts.length === 0) fail(where, 'names nothing to decode: give "standard" and/or "contracts"');
  return { standard, tokens, contracts };
}

/** The latest verified ABI and name of a contract in the lake's `contracts` dataset. */
async function abiFromLake(engine: Engine, paths: LakePaths, network: Network, address: string): Promise<{ abi: string; name: string | null } | undefined> {
  // Loaded here: parsing a job's decode section (every command that reads a job) must not load DuckDB.
  const { currentTableFiles } = await import('../load/catalog.js');
  const files = await currentTableFiles(paths, 'contracts', network);
  if (files.length === 0) return undefined;
  return abiFromContracts(engine.conn, `SELECT * FROM read_parquet(${literalList(files)}, hive_partitioning = false, union_by_name = true)`, address);
}

/** A contract's verified ABI and name from a relation of `contracts` rows (of one network): either lake's. */
export async function abiFromContracts(conn: DuckDBConnection, contracts: string, address: string): Promise<{ abi: string; name: string | null } | undefined> {
  const rows = (
    await conn.runAndReadAll(
      `SELECT abi::VARCHAR, contract_name FROM (${contracts})
       WHERE contract_address = ${literal(address)} AND verified AND abi IS NOT NULL ORDER BY _ingested_at DESC, contract_name NULLS LAST LIMIT 1`,
    )
  ).getRowsJS() as [string, string | null][];
  if (rows.length === 0) return undefined;
  // Both endpoints give a row; the code record (#15) has the name: take it from any row of the contract.
  const named = (
    await conn.runAndReadAll(
      `SELECT contract_name FROM (${contracts}) WHERE contract_address = ${literal(address)} AND contract_name IS NOT NULL ORDER BY _ingested_at DESC LIMIT 1`,
    )
  ).getRowsJS() as [string][];
  return { abi: rows[0]![0], name: named[0]?.[0] ?? rows[0]![1] };
}

/**
 * The datasets a spec means. A contract's ABI comes from its signatures, its ABI file, or the lake's
 * `contracts` dataset (export `contracts` for the address first, in the same job or before).
 */
export async function resolveDatasets(spec: DecodeSpec, opts: AbiSources): Promise<DecodedDataset[]> {
  const out: DecodedDataset[] = [];
  const names = new Set<string>();
  const add = (d: DecodedDataset): void => {
    if (names.has(d.name)) return;
    names.add(d.name);
    out.push(d);
  };
  for (const s of spec.standard) for (const n of STANDARD_GROUPS[s] ?? [s]) add({ ...STANDARD[n]!, contracts: spec.tokens });
  for (const c of spec.contracts) {
    const found = await contractEvents(c, opts);
    const events = chosenEvents(c, found.events);
    const label = c.name ?? found.label ?? `c_${c.address.slice(2, 10)}`;
    const overloaded = new Set(events.filter((e, i) => events.findIndex((x) => x.name === e.name) !== i).map((e) => e.name));
    // Overloaded events (one name, several signatures) get their parameter count in the name.
    for (const e of events) add(eventDataset(label, [c.address], e, found.origin, overloaded.has(e.name) ? `${e.name}${e.inputs.length}` : e.name));
  }
  return out;
}

/** Where a contract's ABI may come from besides the spec: the lake's `contracts` dataset, or the API. */
interface AbiSources {
  engine?: Engine;
  paths?: LakePaths;
  network: Network;
  fetchAbi?: (address: string) => Promise<unknown>;
  /** A distributed lake's `contracts` rows of the network (instead of a local lake's `paths`). */
  contracts?: { conn: DuckDBConnection; relation: string };
}

type ContractSpec = DecodeSpec['contracts'][number];

/** A contract's events, from its signatures, its ABI file, or its verified ABI (the lake's, else the API's). */
async function contractEvents(c: ContractSpec, opts: AbiSources): Promise<{ events: AbiEvent[]; origin: string; label?: string }> {
  if (c.signatures) return { events: c.signatures.map(eventOfSignature), origin: 'event signatures given' };
  if (c.abiFile) {
    let text: string;
    try {
      text = await readFile(c.abiFile, 'utf8');
    } catch (e) {
      throw new DecodeSpecError(`cannot read the ABI file ${c.abiFile} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    return { events: eventsOfAbi(text, c.abiFile), origin: `ABI file ${path.basename(c.abiFile)}` };
  }
  let found = opts.contracts
    ? await abiFromContracts(opts.contracts.conn, opts.contracts.relation, c.address)
    : opts.engine && opts.paths
      ? await abiFromLake(opts.engine, opts.paths, opts.network, c.address)
      : undefined;
  // Not in the lake: the API's ABI (explorer #14), where the caller can ask it (a job run).
  if (!found && opts.fetchAbi) {
    const abi = await opts.fetchAbi(c.address).catch((e: Error) => {
      throw new DecodeSpecError(`no ABI of ${c.address} in the lake's contracts dataset, and the API did not give one (#14): ${e.message}`);
    });
    found = { abi: JSON.stringify(abi), name: null };
  }
  if (!found)
    throw new DecodeSpecError(
      `no verified ABI of ${c.address} in the lake's contracts dataset (${opts.network}): export "contracts" for it first (explorer #14), or give an ABI file or event signatures`,
    );
  return {
    events: eventsOfAbi(found.abi, `ABI of ${c.address}`),
    origin: 'the contract’s ABI (explorer #14)',
    ...(found.name ? { label: snake(found.name) } : {}),
  };
}

/** The events the spec names (each must be in the ABI), or all of them; none at all is refused. */
function chosenEvents(c: ContractSpec, events: AbiEvent[]): AbiEvent[] {
  if (c.events) {
    for (const e of c.events)
      if (!events.some((x) => x.name === e))
        throw new DecodeSpecError(`${c.address}: the ABI has no event ${e} (it has: ${events.map((x) => x.name).join(', ') || 'none'})`);
    events = events.filter((e) => c.events!.includes(e.name));
  }
  if (events.length === 0) throw new DecodeSpecError(`${c.address}: the ABI has no events to decode`);
  return events;
}

export { AbiError };
