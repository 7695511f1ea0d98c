// Well-known addresses and hashes of a chain, each with data behind it at the initial head.

import {
  A_BUSY0,
  A_CREATED0,
  A_CROWDED,
  A_ERC20_0,
  A_ERC721_0,
  A_MINER0,
  A_NFT_HOLDER,
  A_POOL0,
  A_STAKING,
  A_WHALE,
  Chain,
  ERC721_META,
  F_FAILED,
  K_CALL,
  K_TRANSFER,
  N_BUSY,
  N_ERC20,
  N_ERC721,
  N_POOLS,
  TRACE_TEMPLATES,
  WEIRD_TOKEN,
} from './chain.js';
import { hash2 } from './rng.js';

export const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';

export interface SimulatorExamples {
  addresses: string[];
  whale: string;
  miner: string;
  erc20Token: string;
  erc721Token: string;
  nftHolder: string;
  verifiedContract: string;
  unverifiedContract: string;
  transactionHash: string;
  failedTransactionHash: string;
  internalTransactionHash: string;
  transferTopic: string;
  block: number;
  pools: string[];
  pids: number[];
  crowdedBlockAddress: string;
  crowdedBlock: number;
}

/** Contracts verified from the start (others can be verified at run time through POST verify). */
export function isVerifiedAtGenesis(i: number): boolean {
  if (i >= A_ERC20_0 && i < A_ERC20_0 + N_ERC20) return i - A_ERC20_0 !== WEIRD_TOKEN;
  if (i >= A_ERC721_0 && i < A_ERC721_0 + N_ERC721) return ERC721_META[i - A_ERC721_0]!.name !== null;
  if (i >= A_POOL0 && i <= A_STAKING) return true;
  if (i >= A_CREATED0) return (i - A_CREATED0) % 3 === 0;
  return false;
}

export function traceTemplateOf(c: Chain, t: number): number {
  return hash2(c.kVal ^ 0x77, t) % TRACE_TEMPLATES.length;
}

export function computeExamples(c: Chain): SimulatorExamples {
  const a = (i: number): string => c.addrLower(i);
  const whaleIds = c.idxFrom.ids.subarray(c.idxFrom.off[A_WHALE]!, c.idxFrom.off[A_WHALE + 1]!);
  const mid = Math.floor(whaleIds.length / 2);
  let tx = -1,
    failed = -1,
    internal = -1;
  for (let i = mid; i < whaleIds.length && (tx < 0 || failed < 0 || internal < 0); i++) {
    const t = whaleIds[i]!;
    if (c.txBlk[t]! > c.head) break;
    const kb = c.txKind[t]!;
    if (tx < 0 && kb === K_TRANSFER) tx = t;
    if (failed < 0 && kb === (K_CALL | F_FAILED)) failed = t;
    if (internal < 0 && kb === K_CALL && (traceTemplateOf(c, t) === 3 || traceTemplateOf(c, t) === 4)) internal = t;
  }
  let unverified = A_CREATED0 + 1;
  for (let i = A_CREATED0; i < c.createdEnd; i++) {
    const ct = c.creationTx(i);
    if (!isVerifiedAtGenesis(i) && ct !== 0xffffffff && c.txBlk[ct]! <= c.head) {
      unverified = i;
      break;
    }
  }
  const busy: string[] = [];
  for (let i = 0; i < N_BUSY; i++) busy.push(a(A_BUSY0 + i));
  const pools: string[] = [];
  for (let i = 0; i < N_POOLS; i++) pools.push(a(A_POOL0 + i));
  return {
    addresses: busy,
    whale: a(A_WHALE),
    miner: a(A_MINER0 + 7),
    erc20Token: a(A_ERC20_0),
    erc721Token: a(A_ERC721_0),
    nftHolder: a(A_NFT_HOLDER),
    verifiedContract: a(A_POOL0),
    unverifiedContract: a(unverified),
    transactionHash: c.txHash(tx),
    failedTransactionHash: c.txHash(failed),
    internalTransactionHash: c.txHash(internal),
    transferTopic: TRANSFER_TOPIC,
    block: c.crowdedBlock - 1234,
    pools,
    pids: [0, 1],
    crowdedBlockAddress: a(A_CROWDED),
    crowdedBlock: c.crowdedBlock,
  };
}
