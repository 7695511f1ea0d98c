// Decoded-event datasets: which logs of `event_logs` they read, and their columns. Standard token events have
// fixed datasets (across every token contract); any other event gets one from its ABI, named for the contract
// and the event.

import type { AbiEvent, AbiParameter } from 'viem';
import { DATASETS } from '../datasets/registry.js';
import { selectorOf, signatureText } from './abi.js';
import { DecodeSpecError } from './spec-error.js';
import { duckType, elementOf, fieldName, hasWide, isArray, isDynamicOrComposite, isWideInt } from './types.js';

export interface DecodedColumn {
  name: string;
  type: string;
  doc: string;
}

/** Where one event parameter lands: a column, stored as exact decimal text (`text`), or unnested (`explode`). */
export interface ParamTarget {
  column: string;
  /** uint256 ids kept as exact decimal text (as the lake keeps token ids), not DECIMAL(38,0). */
  text?: boolean;
  /** An array parameter unnested into one row per element, side by side with the other exploded one. */
  explode?: boolean;
}

export interface EventSource {
  event: AbiEvent;
  /** Label in reasons and the `event` column. */
  label: string;
  /** topic_0 of the event; null for anonymous events. */
  topic0: string | null;
  /** One per input, by position. */
  targets: ParamTarget[];
}

export interface DecodedDataset {
  name: string;
  doc: string;
  notes: string[];
  /** Name of the emitting contract's column. */
  contractColumn: string;
  /** Only logs of these contracts (lower-case); every contract when absent. */
  contracts?: string[];
  sources: EventSource[];
  /** Has `batch_position` (a row per element of exploded arrays). */
  exploded: boolean;
  /** Event-specific columns, in file order (after the common ones). */
  columns: DecodedColumn[];
}

export const RAW_DOC = (c: string): string => `Exact decimal text of ${c} when it is >= 10^38 in magnitude (then ${c} is NULL); NULL otherwise.`;

/** The columns every decoded dataset starts with. */
export function commonColumns(d: DecodedDataset): DecodedColumn[] {
  return [
    { name: d.contractColumn, type: 'VARCHAR', doc: 'Contract that emitted the log, lower-case.' },
    { name: 'timestamp', type: 'TIMESTAMP WITH TIME ZONE', doc: 'UTC time of the block holding the log.' },
    { name: 'transaction_hash', type: 'VARCHAR', doc: 'Transaction that emitted the log, lower-case.' },
    { name: 'transaction_index', type: 'BIGINT', doc: 'Index of that transaction within its block.' },
    { name: 'log_index', type: 'BIGINT', doc: 'Index of the log within its block.' },
    ...(d.exploded ? [{ name: 'batch_position', type: 'INTEGER', doc: 'Position of the row’s id and value in a batch (0 for single transfers).' }] : []),
    ...(d.sources.length > 1 ? [{ name: 'event', type: 'VARCHAR', doc: `Which event the row decodes: ${d.sources.map((s) => s.label).join(', ')}.` }] : []),
  ];
}

export const RUN_COLUMNS: DecodedColumn[] = [
  { name: '_run_id', type: 'VARCHAR', doc: 'The chainlake run that decoded this row.' },
  { name: '_ingested_at', type: 'TIMESTAMP WITH TIME ZONE', doc: 'When that run decoded it (UTC).' },
];

/** Every column of the dataset's files, in order. */
export function allColumns(d: DecodedDataset): DecodedColumn[] {
  return [...commonColumns(d), ...d.columns, ...RUN_COLUMNS];
}

export function naturalKey(d: DecodedDataset): string[] {
  return ['transaction_hash', 'log_index', ...(d.exploded ? ['batch_position'] : [])];
}

// ---- standard token events ---------------------------------------------------------------------------

const ev = (name: string, inputs: [string, string, boolean][]): AbiEvent => ({
  type: 'event',
  name,
  anonymous: false,
  inputs: inputs.map(([type, n, indexed]) => ({ type, name: n, indexed })),
});
const TRANSFER20 = ev('Transfer', [
  ['address', 'from', true],
  ['address', 'to', true],
  ['uint256', 'value', false],
]);
const TRANSFER721 = ev('Transfer', [
  ['address', 'from', true],
  ['address', 'to', true],
  ['uint256', 'tokenId', true],
]);
const APPROVAL20 = ev('Approval', [
  ['address', 'owner', true],
  ['address', 'spender', true],
  ['uint256', 'value', false],
]);
const APPROVAL721 = ev('Approval', [
  ['address', 'owner', true],
  ['address', 'approved', true],
  ['uint256', 'tokenId', true],
]);
const APPROVAL_ALL = ev('ApprovalForAll', [
  ['address', 'owner', true],
  ['address', 'operator', true],
  ['bool', 'approved', false],
]);
const SINGLE = ev('TransferSingle', [
  ['address', 'operator', true],
  ['address', 'from', true],
  ['address', 'to', true],
  ['uint256', 'id', false],
  ['uint256', 'value', false],
]);
const BATCH = ev('TransferBatch', [
  ['address', 'operator', true],
  ['address', 'from', true],
  ['address', 'to', true],
  ['uint256[]', 'ids', false],
  ['uint256[]', 'values', false],
]);

/** keccak256 of the standard events' signatures (constants, so that no ABI library loads for them; a test checks them). */
export const STANDARD_TOPICS: Record<string, string> = {
  Transfer: '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef',
  Approval: '0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925',
  ApprovalForAll: '0x17307eab39ab6107e8899845ad3d59bd9653f200f220920489ca2b5937696c31',
  TransferSingle: '0xc3d58168c5ae7397731d063d5bbf3d657854427343f4c083240f7aacaa2d0f62',
  TransferBatch: '0x4a39dc06d4c0dbc64b70af90fd698a233a518aa5d07e595d983b8c0526c8f7fb',
};
const src = (event: AbiEvent, label: string, targets: ParamTarget[]): EventSource => ({ event, label, topic0: STANDARD_TOPICS[event.name]!, targets });
const addr = (name: string, doc: string): DecodedColumn => ({ name, type: 'VARCHAR', doc: `${doc}, lower-case.` });
const amount = (name: string, doc: string): DecodedColumn[] => [
  { name, type: 'DECIMAL(38,0)', doc: `${doc}, exact; NULL when >= 10^38 (up to 2^256-1): see ${name}_raw.` },
  { name: `${name}_raw`, type: 'VARCHAR', doc: RAW_DOC(name) },
];
const tokenId: DecodedColumn = { name: 'token_id', type: 'VARCHAR', doc: 'Token id as exact decimal text (up to 2^256-1; ids are never summed).' };

const standardNote = (sig: string): string =>
  `Decoded from the event_logs rows whose topic_0 is the keccak256 of ${sig}, of any contract (or of the contracts the job names). A log of another standard's event of the same signature (an ERC-721 Transfer, 4 topics, when only ERC-20 is decoded, or the other way round) is skipped and counted in the decoding's report (it is that standard's dataset's, when decoded too). A log whose topics or data fit neither (short data, an address word with high bytes set) goes to _rejects with the reason, never into wrong columns.`;
const NO_BLOCK =
  'The explorer’s event logs (#18) carry no block number: rows have the block’s timestamp (and block_date partition); join transactions on transaction_hash for the block number.';

/** The standard token-event datasets, by name. */
export const STANDARD: Record<string, DecodedDataset> = Object.fromEntries(
  (
    [
      {
        name: 'erc20_transfer_events',
        doc: 'ERC-20 Transfer events decoded from event_logs: token, sender, receiver and exact amount, one row per log.',
        notes: [
          standardNote('Transfer(address,address,uint256)') +
            ' ERC-20 Transfers have 3 topics and 32 bytes of data; ERC-721 ones (4 topics) belong to erc721_transfer_events.',
          NO_BLOCK,
        ],
        contractColumn: 'token_address',
        sources: [src(TRANSFER20, 'Transfer', [{ column: 'sender' }, { column: 'receiver' }, { column: 'value' }])],
        exploded: false,
        columns: [
          addr('sender', 'Address the tokens left (the zero address for a mint)'),
          addr('receiver', 'Address the tokens went to (the zero address for a burn)'),
          ...amount('value', 'Amount in the token’s smallest unit'),
        ],
      },
      {
        name: 'erc20_approval_events',
        doc: 'ERC-20 Approval events decoded from event_logs: token, owner, spender and the exact allowance, one row per log.',
        notes: [
          standardNote('Approval(address,address,uint256)') + ' ERC-20 Approvals have 3 topics; ERC-721 ones (4 topics) belong to erc721_approval_events.',
          NO_BLOCK,
        ],
        contractColumn: 'token_address',
        sources: [src(APPROVAL20, 'Approval', [{ column: 'owner' }, { column: 'spender' }, { column: 'value' }])],
        exploded: false,
        columns: [
          addr('owner', 'Owner of the tokens'),
          addr('spender', 'Address allowed to spend them'),
          ...amount('value', 'Allowance in the token’s smallest unit (2^256-1 is the usual "unlimited")'),
        ],
      },
      {
        name: 'erc721_transfer_events',
        doc: 'ERC-721 Transfer events decoded from event_logs: collection, sender, receiver and token id, one row per log.',
        notes: [standardNote('Transfer(address,address,uint256)') + ' ERC-721 Transfers have 4 topics (the token id indexed) and no data.', NO_BLOCK],
        contractColumn: 'token_address',
        sources: [src(TRANSFER721, 'Transfer', [{ column: 'sender' }, { column: 'receiver' }, { column: 'token_id', text: true }])],
        exploded: false,
        columns: [addr('sender', 'Previous owner (the zero address for a mint)'), addr('receiver', 'New owner (the zero address for a burn)'), tokenId],
      },
      {
        name: 'erc721_approval_events',
        doc: 'ERC-721 Approval events decoded from event_logs: collection, owner, approved address and token id.',
        notes: [standardNote('Approval(address,address,uint256)') + ' ERC-721 Approvals have 4 topics (the token id indexed).', NO_BLOCK],
        contractColumn: 'token_address',
        sources: [src(APPROVAL721, 'Approval', [{ column: 'owner' }, { column: 'approved' }, { column: 'token_id', text: true }])],
        exploded: false,
        columns: [addr('owner', 'Owner of the token'), addr('approved', 'Address approved for it (the zero address clears the approval)'), tokenId],
      },
      {
        name: 'approval_for_all_events',
        doc: 'ApprovalForAll events (ERC-721 and ERC-1155) decoded from event_logs: contract, owner, operator and whether the operator is approved.',
        notes: [standardNote('ApprovalForAll(address,address,bool)'), NO_BLOCK],
        contractColumn: 'token_address',
        sources: [src(APPROVAL_ALL, 'ApprovalForAll', [{ column: 'owner' }, { column: 'operator' }, { column: 'approved' }])],
        exploded: false,
        columns: [
          addr('owner', 'Owner of the tokens'),
          addr('operator', 'Operator'),
          { name: 'approved', type: 'BOOLEAN', doc: 'true when the operator is approved, false when revoked.' },
        ],
      },
      {
        name: 'erc1155_transfer_events',
        doc: 'ERC-1155 TransferSingle and TransferBatch events decoded from event_logs: one row per token id and value (a batch gives one row per element).',
        notes: [
          standardNote('TransferSingle(address,address,address,uint256,uint256) and TransferBatch(address,address,address,uint256[],uint256[])') +
            ' A batch whose ids and values differ in length is a reject.',
          'Natural key: (transaction_hash, log_index, batch_position); batch_position is 0 for TransferSingle.',
          NO_BLOCK,
        ],
        contractColumn: 'token_address',
        sources: [
          src(SINGLE, 'TransferSingle', [
            { column: 'operator' },
            { column: 'sender' },
            { column: 'receiver' },
            { column: 'token_id', text: true },
            { column: 'value' },
          ]),
          src(BATCH, 'TransferBatch', [
            { column: 'operator' },
            { column: 'sender' },
            { column: 'receiver' },
            { column: 'token_id', text: true, explode: true },
            { column: 'value', explode: true },
          ]),
        ],
        exploded: true,
        columns: [
          addr('operator', 'Address that made the transfer'),
          addr('sender', 'Address the tokens left (the zero address for a mint)'),
          addr('receiver', 'Address the tokens went to'),
          tokenId,
          ...amount('value', 'Amount of that token id'),
        ],
      },
    ] satisfies DecodedDataset[]
  ).map((d) => [d.name, d]),
);

/** The standard groups a job names, and the datasets each means. */
export const STANDARD_GROUPS: Record<string, string[]> = {
  erc20: ['erc20_transfer_events', 'erc20_approval_events'],
  erc721: ['erc721_transfer_events', 'erc721_approval_events', 'approval_for_all_events'],
  erc1155: ['erc1155_transfer_events', 'approval_for_all_events'],
};

/** A standard event that shares its topic_0 with another standard's event of another shape. */
export interface StandardShape {
  /** The dataset that decodes it. */
  dataset: string;
  /** Its name in reports: the standard and the event, e.g. `erc721 Transfer`. */
  label: string;
  source: EventSource;
}

/**
 * ERC-20 and ERC-721 Transfer and Approval: one signature text each, so one topic_0, but the token id of ERC-721
 * is indexed (4 topics, no data) where the ERC-20 amount is data (3 topics, one word). The standard datasets read
 * every contract's logs of their topic_0, so a log of the other shape is the other standard's event, not a bad
 * log (decode.ts skips and counts it when its dataset is not decoded).
 */
export const STANDARD_SHAPES: StandardShape[] = Object.values(STANDARD).flatMap((d) =>
  d.sources
    .filter((s) => Object.values(STANDARD).some((o) => o.name !== d.name && o.sources.some((x) => x.topic0 === s.topic0)))
    .map((s) => ({
      dataset: d.name,
      label: `${Object.keys(STANDARD_GROUPS).find((g) => STANDARD_GROUPS[g]!.includes(d.name))!} ${s.event.name}`,
      source: s,
    })),
);

// ---- any event, from an ABI ------------------------------------------------------------------------------

const IDENT = /^[a-z][a-z0-9_]*$/;

/** `SwapPair` -> `swap_pair`. */
export const snake = (s: string): string =>
  s
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/[^A-Za-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .toLowerCase();

/** The columns of one event's parameters (see types.ts for the rules). */
export function paramColumns(e: AbiEvent): { targets: ParamTarget[]; columns: DecodedColumn[] } {
  const targets: ParamTarget[] = [];
  const columns: DecodedColumn[] = [];
  e.inputs.forEach((p: AbiParameter, i) => {
    const indexed = (p as { indexed?: boolean }).indexed === true;
    const base = fieldName(p.name, i, 'arg');
    const what = `${p.name || `parameter ${i}`} (${p.type}${indexed ? ', indexed' : ''})`;
    if (indexed && isDynamicOrComposite(p)) {
      const column = `${base}_hash`;
      targets.push({ column });
      columns.push({
        name: column,
        type: 'VARCHAR',
        doc: `keccak256 of ${what}: the EVM stores an indexed ${p.type} as its hash, so the value itself is not in the log.`,
      });
      return;
    }
    targets.push({ column: base });
    const type = duckType(p);
    const kind = isWideInt(p.type)
      ? ', exact; NULL when it does not fit DECIMAL(38,0): see the _raw column'
      : p.type === 'address'
        ? ', lower-case'
        : /^bytes/.test(p.type)
          ? ', 0x hex, lower-case'
          : isArray(p) && hasWide(elementOf(p))
            ? '; wide integers inside are NULL where they do not fit DECIMAL(38,0): see the _raw column'
            : hasWide(p)
              ? '; wide integers inside are NULL where they do not fit DECIMAL(38,0): see the _raw column'
              : '';
    columns.push({ name: base, type, doc: `${what}${kind}.` });
    if (hasWide(p)) {
      columns.push({
        name: `${base}_raw`,
        type: 'VARCHAR',
        doc: isWideInt(p.type)
          ? RAW_DOC(base)
          : `The whole ${base} as JSON with every wide integer as exact decimal text, when one of them does not fit DECIMAL(38,0); NULL otherwise.`,
      });
    }
  });
  return { targets, columns };
}

/** The dataset of one event of a contract: `<contract>_<event>` (snake case). */
export function eventDataset(label: string, contracts: string[] | undefined, e: AbiEvent, origin: string, eventName = e.name): DecodedDataset {
  const name = `${snake(label)}_${snake(eventName)}`;
  if (!IDENT.test(name))
    throw new DecodeSpecError(
      `cannot name a dataset for ${label} / ${e.name}: ${JSON.stringify(name)} is not a plain identifier (lower-case letters, digits and _): give the contract a name`,
    );
  if (DATASETS[name] || STANDARD[name])
    throw new DecodeSpecError(`dataset name ${name} (contract ${label}, event ${e.name}) is taken; give the contract another name`);
  const { targets, columns } = paramColumns(e);
  const seen = new Set(['timestamp', 'transaction_hash', 'transaction_index', 'log_index', 'contract_address', '_run_id', '_ingested_at']);
  for (const c of columns) {
    if (seen.has(c.name))
      throw new DecodeSpecError(
        `event ${e.name} of ${label}: parameter column ${c.name} clashes with another column of its dataset ${name}: give the event's signature with another name for it ("signatures", --signature)`,
      );
    seen.add(c.name);
  }
  const notes = [
    `Decoded from event_logs rows of ${contracts?.length ? contracts.join(', ') : 'every contract'} by the event ${signatureText(e)} (${origin}).`,
    e.anonymous
      ? 'Anonymous event: its logs have no signature topic, so topic_0 is its first indexed parameter. Logs of the contract whose topic_0 is no other event’s signature are decoded as this event; those that do not fit go to _rejects.'
      : `topic_0 = ${selectorOf(e)}.`,
    ...(e.inputs.some((p) => (p as { indexed?: boolean }).indexed && isDynamicOrComposite(p))
      ? ['Indexed string, bytes, array and tuple parameters are stored by the EVM as the keccak256 of their value: their columns (…_hash) hold that hash.']
      : []),
    NO_BLOCK,
  ];
  return {
    name,
    doc: `${e.name} events of ${label} decoded from event_logs, one row per log.`,
    notes,
    contractColumn: 'contract_address',
    contracts,
    sources: [{ event: e, label: e.name, topic0: e.anonymous ? null : selectorOf(e), targets }],
    exploded: false,
    columns,
  };
}

/** describe's text for a decoded dataset. */
export function describeDecoded(d: DecodedDataset): string {
  const cols = allColumns(d);
  const w = Math.max(...cols.map((c) => c.name.length));
  const tw = Math.max(...cols.map((c) => c.type.length));
  return [
    `${d.name} (decoded events: ${d.sources.map((s) => signatureText(s.event)).join('; ')})`,
    `  ${d.doc}`,
    `  natural key: ${naturalKey(d).join(', ')}`,
    '  partitioned by: network, block_date (UTC date of timestamp)',
    '  notes:',
    ...d.notes.map((n) => `    - ${n}`),
    '  columns:',
    ...cols.map((c) => `    ${c.name.padEnd(w)}  ${c.type.padEnd(tw)}  ${c.doc}`),
  ].join('\n');
}
