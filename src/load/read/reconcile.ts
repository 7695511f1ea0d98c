// Reconciliation: the balances the API reports (`balances`, `token_balances`) against the balances the lake's
// own rows imply, where the lake holds the address's whole history. One SQL text over the tables a lake reader
// offers (datasets, `windows`, `runs`), which local and distributed readers both give in the same columns, so the
// two kinds of lake are reconciled by the same statement. Sums are exact: amounts within DECIMAL(38,0) are added
// as HUGEINT in SQL, the rare ones beyond (held as `<column>_raw` text) as BigInt here.

import type { DuckDBConnection } from '@duckdb/node-api';
import { ChainlakeError } from '../../errors.js';
import type { DeclaredTable, TableShape } from '../schema.js';

/** The asset of a native-coin balance (a token's is its contract address). */
export const NATIVE_ASSET = 'native';

export type ReconcileOutcome = 'reconciled' | 'differs' | 'unchecked';

/** Genesis allocations (wei) per network and lower-case address: the opening balances no listing shows. */
export type GenesisAllocations = ReadonlyMap<string, ReadonlyMap<string, bigint>>;

export interface ReconciliationRow {
  network: string;
  snapshotDate: string;
  address: string;
  asset: string;
  /** The block the reported balance is taken at: the head its run pinned. */
  atBlock: number | null;
  reported: bigint | null;
  computed: bigint | null;
  difference: bigint | null;
  outcome: ReconcileOutcome;
  reason: string | null;
  /** Lake rows summed into `computed`. */
  rows: number;
}

export const RECONCILIATION = 'reconciliation';

const amount = (name: string, what: string) => [
  { name, type: 'DECIMAL(38,0)', doc: `${what}, in the asset's smallest unit. NULL when beyond DECIMAL(38,0); see ${name}_raw.` },
  { name: `${name}_raw`, type: 'VARCHAR', doc: `Exact decimal text of ${name} when it is beyond DECIMAL(38,0); NULL otherwise.` },
];

/** The derived `reconciliation` table: one row per reported balance (address, asset) and snapshot day. */
export const RECONCILIATION_SHAPE: TableShape = {
  name: RECONCILIATION,
  columns: [
    { name: 'address', type: 'VARCHAR', doc: 'The account, lower-case.' },
    { name: 'asset', type: 'VARCHAR', doc: `'${NATIVE_ASSET}' for the native coin, else the token's contract (ERC-20 or ERC-721), lower-case.` },
    { name: 'at_block', type: 'BIGINT', doc: 'The block the reported balance is taken at: the head pinned by the run that fetched it.' },
    ...amount('reported', 'The balance the API reported (balances, token_balances)'),
    ...amount('computed', "The balance the lake's rows imply up to at_block (NULL when not computed)"),
    ...amount('difference', 'reported - computed (NULL when not computed)'),
    { name: 'reconciled', type: 'BOOLEAN', doc: 'true when reported = computed over a whole history the lake holds.' },
    {
      name: 'outcome',
      type: 'VARCHAR',
      doc: 'reconciled; differs (a whole history held and a difference found); unchecked (the lake cannot say: see reason).',
    },
    {
      name: 'reason',
      type: 'VARCHAR',
      doc: 'Why the row is not reconciled (history not complete, opening balance unknown, a difference, …); NULL when it is.',
    },
    { name: 'rows_counted', type: 'BIGINT', doc: 'Lake rows summed into computed.' },
    { name: '_run_id', type: 'VARCHAR', doc: 'The chainlake reconcile run that wrote this row.' },
    { name: '_ingested_at', type: 'TIMESTAMP WITH TIME ZONE', doc: 'When that run computed it (UTC).' },
  ],
  key: ['address', 'asset'],
  order: ['address', 'asset'],
  partition: 'snapshot_date',
};

export const RECONCILIATION_DOC =
  "Balances the API reported (balances, token_balances) against the balances the lake's own rows imply (value in and out of successful transactions, fees of every sent transaction, internal transfers, mining rewards; ERC-20 transfers per token; for an ERC-721 token the number of tokens held, from the transfers of one of erc721_transfers' endpoints), where the lake holds the address's whole history up to the balance's block. Written by chainlake reconcile. Natural key: (address, asset). Partitioned by network, snapshot_date.";

/** The reconciliation's table as a commit declares it (the ledger's declared_tables). */
export const RECONCILIATION_TABLE: DeclaredTable = {
  shape: RECONCILIATION_SHAPE,
  doc: RECONCILIATION_DOC,
  partitionDoc: 'UTC date of the balance snapshot (partition).',
};

/**
 * The SQL: per reported balance, the exact sum of the lake's movements of that asset up to the balance's block
 * (in-range amounts summed as HUGEINT, out-of-range ones listed as signed text), and how far each dataset the
 * sum needs is covered from block 0 by committed windows of the address's own scope.
 */
const RECONCILE_SQL = `
WITH heads AS (
  SELECT run_id, TRY_CAST(json_extract_string(report, '$.head') AS BIGINT) AS head FROM runs
),
snap AS (
  SELECT b.network, CAST(b.snapshot_date AS VARCHAR) AS snapshot_date, b.address, '${NATIVE_ASSET}' AS asset,
         CAST(b.balance AS VARCHAR) AS reported, b.balance_raw AS reported_raw, h.head AS at_block, true AS found
  FROM balances b LEFT JOIN heads h ON h.run_id = b._run_id
  UNION ALL
  SELECT t.network, CAST(t.snapshot_date AS VARCHAR), t.holder_address, t.token_address,
         CAST(t.balance AS VARCHAR), t.balance_raw, h.head, coalesce(t.found, true)
  FROM token_balances t LEFT JOIN heads h ON h.run_id = t._run_id
),
win AS (
  -- erc721_transfers' two endpoints each list an address's whole ERC-721 history: a history per endpoint
  SELECT network,
         CASE WHEN dataset = 'erc721_transfers' THEN dataset || ':' || regexp_extract(scope, '(^|&)endpoint=([a-z0-9_]+)', 2) ELSE dataset END AS dataset,
         nullif(regexp_extract(scope, '(^|&)address=(0x[0-9a-fA-F]{40})', 2), '') AS address, from_block, to_block, run_id
  FROM windows
  WHERE status = 'committed'
    AND dataset IN ('transactions', 'internal_transactions', 'erc20_transfers', 'erc721_transfers', 'mined_blocks')
    -- per-transaction internal-transaction windows (#13) list one transaction's traces, not an address's history
    AND (dataset <> 'internal_transactions' OR scope LIKE '%endpoint=account_internal_transactions%')
),
ranged AS (
  SELECT network, dataset, lower(address) AS address, from_block, to_block,
         max(to_block) OVER (PARTITION BY network, dataset, lower(address) ORDER BY from_block, to_block
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach_before
  FROM win WHERE address IS NOT NULL AND from_block IS NOT NULL AND to_block IS NOT NULL AND dataset <> 'mined_blocks'
),
gaps AS (
  SELECT network, dataset, address, min(from_block) FILTER (WHERE from_block > coalesce(reach_before, -1) + 1) AS gap_at
  FROM ranged GROUP BY network, dataset, address
),
covered AS (
  SELECT r.network, r.dataset, r.address,
         coalesce(max(r.to_block) FILTER (WHERE g.gap_at IS NULL OR r.from_block < g.gap_at), -1) AS covered_to
  FROM ranged r JOIN gaps g USING (network, dataset, address) GROUP BY r.network, r.dataset, r.address
  UNION ALL
  -- mined_blocks has no block filter: a committed window is the miner's whole listing as of its run's head
  SELECT w.network, w.dataset, lower(w.address), max(h.head)
  FROM win w JOIN heads h ON h.run_id = w.run_id
  WHERE w.dataset = 'mined_blocks' AND w.address IS NOT NULL GROUP BY w.network, w.dataset, lower(w.address)
),
erc721 AS (SELECT DISTINCT network, token_address FROM erc721_transfers),
-- the endpoint whose rows an ERC-721 balance is counted from: one that holds the address's whole history up to
-- the balance's block (a transfer both endpoints list is a row of each: counting both would count it twice)
snap_of AS (
  SELECT s.*, e721.token_address IS NOT NULL AS is_erc721,
         CASE WHEN e721.token_address IS NULL THEN NULL
              WHEN acc.covered_to >= s.at_block THEN 'account_erc721_transfers'
              WHEN tok.covered_to >= s.at_block THEN 'erc721_token_transfers' END AS origin,
         greatest(acc.covered_to, tok.covered_to) AS erc721_to
  FROM snap s
  LEFT JOIN erc721 e721 ON e721.network = s.network AND e721.token_address = s.asset
  LEFT JOIN covered acc ON acc.network = s.network AND acc.dataset = 'erc721_transfers:account_erc721_transfers' AND acc.address = s.address
  LEFT JOIN covered tok ON tok.network = s.network AND tok.dataset = 'erc721_transfers:erc721_token_transfers' AND tok.address = s.address
),
moves AS (
  -- a NULL amount with NULL raw text is an amount the lake does not know (a status the API did not give)
  SELECT network, receiver AS address, '${NATIVE_ASSET}' AS asset, block_number,
         CASE WHEN tx_status THEN value END AS amt, CASE WHEN tx_status THEN value_raw END AS raw, 1 AS sign,
         CAST(NULL AS VARCHAR) AS origin
  FROM transactions WHERE tx_status IS NOT FALSE AND receiver IS NOT NULL
  UNION ALL
  SELECT network, contract_address, '${NATIVE_ASSET}', block_number,
         CASE WHEN tx_status THEN value END, CASE WHEN tx_status THEN value_raw END, 1, NULL
  FROM transactions WHERE tx_status IS NOT FALSE AND receiver IS NULL AND contract_address IS NOT NULL
  UNION ALL
  SELECT network, sender, '${NATIVE_ASSET}', block_number,
         CASE WHEN tx_status THEN value END, CASE WHEN tx_status THEN value_raw END, -1, NULL
  FROM transactions WHERE tx_status IS NOT FALSE AND sender IS NOT NULL
  UNION ALL
  -- fees: every transaction the address sent pays its fee, failed ones too
  SELECT network, sender, '${NATIVE_ASSET}', block_number, tx_fee, tx_fee_raw, -1, NULL
  FROM transactions WHERE sender IS NOT NULL
  UNION ALL
  -- internal transfers that executed; delegate and static calls move no value of their own
  SELECT network, receiver, '${NATIVE_ASSET}', block_number, CASE WHEN status THEN value END, CASE WHEN status THEN value_raw END, 1, NULL
  FROM internal_transactions
  WHERE status IS NOT FALSE AND receiver IS NOT NULL AND coalesce(trace_type, 'call') NOT IN ('delegatecall', 'staticcall')
  UNION ALL
  SELECT network, sender, '${NATIVE_ASSET}', block_number, CASE WHEN status THEN value END, CASE WHEN status THEN value_raw END, -1, NULL
  FROM internal_transactions
  WHERE status IS NOT FALSE AND sender IS NOT NULL AND coalesce(trace_type, 'call') NOT IN ('delegatecall', 'staticcall')
  UNION ALL
  -- the block's whole reward: the mining reward and the fees the chain credits to its miner
  SELECT network, miner, '${NATIVE_ASSET}', block_number, coalesce(reward, mining_reward + fees), reward_raw, 1, NULL
  FROM mined_blocks WHERE miner IS NOT NULL
  UNION ALL
  SELECT network, receiver, token_address, block_number, value, value_raw, 1, NULL FROM erc20_transfers
  UNION ALL
  SELECT network, sender, token_address, block_number, value, value_raw, -1, NULL FROM erc20_transfers
  UNION ALL
  -- an ERC-721 transfer moves one token: the balance the API reports is the number of tokens held
  SELECT network, receiver, token_address, block_number, 1, NULL, 1, origin_endpoint FROM erc721_transfers
  UNION ALL
  SELECT network, sender, token_address, block_number, 1, NULL, -1, origin_endpoint FROM erc721_transfers
),
agg AS (
  SELECT s.network, s.snapshot_date, s.address, s.asset,
         CAST(sum(CAST(m.amt AS HUGEINT) * m.sign) AS VARCHAR) AS small_sum,
         list(CASE WHEN m.sign < 0 THEN '-' ELSE '' END || m.raw) FILTER (WHERE m.amt IS NULL AND m.raw IS NOT NULL) AS big,
         count(m.block_number) FILTER (WHERE m.amt IS NULL AND m.raw IS NULL) AS unknown,
         count(m.block_number) AS n
  FROM snap_of s LEFT JOIN moves m ON m.network = s.network AND m.address = s.address AND m.asset = s.asset AND m.block_number <= s.at_block
    AND m.origin IS NOT DISTINCT FROM s.origin
  GROUP BY s.network, s.snapshot_date, s.address, s.asset
)
SELECT s.network, s.snapshot_date, s.address, s.asset, s.at_block, s.reported, s.reported_raw, s.found,
       a.small_sum, a.big, a.unknown, a.n,
       tx.covered_to AS tx_to, itx.covered_to AS itx_to, mb.covered_to AS mined_to, e20.covered_to AS erc20_to,
       s.is_erc721, s.erc721_to
FROM snap_of s
JOIN agg a ON a.network = s.network AND a.snapshot_date = s.snapshot_date AND a.address = s.address AND a.asset = s.asset
LEFT JOIN covered tx ON tx.network = s.network AND tx.dataset = 'transactions' AND tx.address = s.address
LEFT JOIN covered itx ON itx.network = s.network AND itx.dataset = 'internal_transactions' AND itx.address = s.address
LEFT JOIN covered mb ON mb.network = s.network AND mb.dataset = 'mined_blocks' AND mb.address = s.address
LEFT JOIN covered e20 ON e20.network = s.network AND e20.dataset = 'erc20_transfers' AND e20.address = s.address
ORDER BY s.network, s.snapshot_date, s.address, s.asset
`;

interface SqlRow {
  network: string;
  snapshot_date: string;
  address: string;
  asset: string;
  at_block: bigint | null;
  reported: string | null;
  reported_raw: string | null;
  found: boolean;
  small_sum: string | null;
  big: string[] | null;
  unknown: bigint;
  n: bigint;
  tx_to: bigint | null;
  itx_to: bigint | null;
  mined_to: bigint | null;
  erc20_to: bigint | null;
  is_erc721: boolean;
  erc721_to: bigint | null;
}

/** Reconciles every reported balance a lake holds, through `conn`: a reader of the lake (either kind). */
export async function reconcileBalances(conn: DuckDBConnection, opts: { genesis?: GenesisAllocations } = {}): Promise<ReconciliationRow[]> {
  const rows = (await conn.runAndReadAll(RECONCILE_SQL)).getRowObjectsJS() as unknown as SqlRow[];
  return rows.map((r) => judge(r, opts.genesis));
}

const covers = (to: bigint | null, block: bigint): boolean => to !== null && to >= block;

/** A reported balance's verdict from its sums and its history's coverage. */
function judge(r: SqlRow, genesis: GenesisAllocations | undefined): ReconciliationRow {
  const native = r.asset === NATIVE_ASSET;
  const reportedText = r.reported ?? r.reported_raw;
  const base = {
    network: r.network,
    snapshotDate: r.snapshot_date.slice(0, 10),
    address: r.address,
    asset: r.asset,
    atBlock: r.at_block === null ? null : Number(r.at_block),
    reported: reportedText === null ? null : BigInt(reportedText),
    computed: null,
    difference: null,
    rows: Number(r.n),
  };
  const unchecked = (reason: string): ReconciliationRow => ({ ...base, outcome: 'unchecked', reason });
  if (r.at_block === null) return unchecked('balance block unknown: the run that fetched the balance recorded no head');
  if (!r.found) return unchecked('the API does not know the token');
  const reported = base.reported;
  if (reported === null) return unchecked('reported balance unknown (NULL)');
  const needs: [string, bigint | null][] = native
    ? [
        ['transactions', r.tx_to],
        ['internal_transactions', r.itx_to],
        ['mined_blocks', r.mined_to],
      ]
    : r.is_erc721
      ? [['erc721_transfers', r.erc721_to]]
      : [['erc20_transfers', r.erc20_to]];
  const short = needs.filter(([, to]) => !covers(to, r.at_block!));
  if (short.length > 0) {
    const what = short.map(([d, to]) => (to === null || to < 0n ? `${d} not held from block 0` : `${d} held from block 0 to ${to} only`)).join(', ');
    return unchecked(`history not complete: ${what} (the balance is at block ${r.at_block})`);
  }
  if (r.unknown > 0n) return unchecked(`${r.unknown} of the lake's rows have no known amount (the API gave no status or value)`);
  let flows = BigInt(r.small_sum ?? '0');
  for (const t of r.big ?? []) flows += BigInt(t);
  // Given a network's allocations, an address they do not name had none.
  const opening = !native ? 0n : genesis?.has(r.network) ? (genesis.get(r.network)!.get(r.address) ?? 0n) : undefined;
  if (opening === undefined) {
    // No genesis allocation given: the part of the balance no listing explains may be one, so a shortfall of
    // the computed balance cannot be judged; an excess can (an allocation is never negative).
    const diff = reported - flows;
    if (diff > 0n)
      return {
        ...base,
        computed: flows,
        difference: diff,
        outcome: 'unchecked',
        reason: `opening balance unknown: the rows explain all but ${diff} wei, which may be a genesis allocation (no listing shows one); give the genesis allocations (--genesis FILE) to check it`,
      };
    return verdict({ ...base, reported }, flows);
  }
  return verdict({ ...base, reported }, opening + flows);
}

function verdict(base: Omit<ReconciliationRow, 'outcome' | 'reason'> & { reported: bigint }, computed: bigint): ReconciliationRow {
  const difference = base.reported - computed;
  if (difference === 0n) return { ...base, computed, difference, outcome: 'reconciled', reason: null };
  return {
    ...base,
    computed,
    difference,
    outcome: 'differs',
    reason: `difference of ${difference} over a whole history the lake holds: a row missing from the lake (or no longer listed by the API), or a transfer kind the API does not list (a genesis allocation, withdrawals, a selfdestruct refund, fees the chain burns)`,
  };
}

/**
 * Genesis allocations from a JSON file's text: `{"<network>": {"<address>": "<wei>", …}, …}` (a chain's genesis
 * `alloc`, which no explorer listing shows). `where` names the file in errors.
 */
export function parseGenesis(text: string, where: string): GenesisAllocations {
  const fail = (problem: string): never => {
    throw new ChainlakeError(`${where}: ${problem}`, {
      code: 'CHAINLAKE_USAGE',
      hint: 'give a JSON object of networks, each an object of address -> balance in wei as a decimal string: {"mainnet": {"0xabc…": "1000"}}',
    });
  };
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    return fail(`not JSON (${(e as Error).message})`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return fail('not a JSON object of networks');
  const out = new Map<string, Map<string, bigint>>();
  for (const [network, alloc] of Object.entries(doc)) {
    if (typeof alloc !== 'object' || alloc === null || Array.isArray(alloc)) return fail(`"${network}" is not an object of address -> wei`);
    const m = new Map<string, bigint>();
    for (const [address, wei] of Object.entries(alloc as Record<string, unknown>)) {
      if (!/^0x[0-9a-fA-F]{40}$/.test(address)) return fail(`"${network}": "${address}" is not an address (0x and 40 hex digits)`);
      if (typeof wei !== 'string' || !/^\d{1,78}$/.test(wei)) return fail(`"${network}"."${address}": ${JSON.stringify(wei)} is not a decimal string of wei`);
      m.set(address.toLowerCase(), BigInt(wei));
    }
    out.set(network, m);
  }
  return out;
}

export interface ReconcileSummary {
  balances: number;
  reconciled: number;
  differs: number;
  unchecked: number;
}

export function summarize(rows: readonly ReconciliationRow[]): ReconcileSummary {
  const n = (o: ReconcileOutcome) => rows.filter((r) => r.outcome === o).length;
  return { balances: rows.length, reconciled: n('reconciled'), differs: n('differs'), unchecked: n('unchecked') };
}
