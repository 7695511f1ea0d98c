// Contract metadata: ABIs, verified source records, and the event signatures the chain's logs use.

import { A_CREATED0, A_ERC20_0, A_ERC721_0, A_POOL0, A_STAKING, Chain, ERC20_META, ERC721_META, N_ERC20, N_ERC721, N_POOLS } from './chain.js';
import { isVerifiedAtGenesis } from './examples.js';
import { keccak256Hex } from '../evm/keccak.js';
import { hash2, hash3 } from './rng.js';
import { word8 } from './hex.js';
import { A_MULTI, A_SHOWCASE, multiAbi, showcaseAbi } from './token-events.js';

interface AbiParam {
  name: string;
  type: string;
  internalType: string;
  indexed?: boolean;
}
type AbiItem = Record<string, unknown>;

const p = (name: string, type: string, indexed?: boolean): AbiParam =>
  indexed === undefined ? { name, type, internalType: type } : { name, type, internalType: type, indexed };
const fn = (name: string, inputs: AbiParam[], outputs: AbiParam[], stateMutability: string): AbiItem => ({
  type: 'function',
  name,
  inputs,
  outputs,
  stateMutability,
});
const ev = (name: string, inputs: AbiParam[]): AbiItem => ({ type: 'event', name, inputs, anonymous: false });
const ctor = (inputs: AbiParam[]): AbiItem => ({ type: 'constructor', inputs, stateMutability: 'nonpayable' });

export const SIG_TRANSFER = 'Transfer(address,address,uint256)';
export const SIG_SWAP = 'Swap(address,uint256,uint256,uint256,uint256,address)';
export const SIG_DEPOSIT = 'Deposit(address,uint256,uint256)';
export const TOPIC_TRANSFER = keccak256Hex(SIG_TRANSFER);
export const TOPIC_SWAP = keccak256Hex(SIG_SWAP);
export const TOPIC_DEPOSIT = keccak256Hex(SIG_DEPOSIT);
export const ABI_TEXT_TRANSFER = 'Transfer(address indexed from, address indexed to, uint256 value)';
export const ABI_TEXT_TRANSFER721 = 'Transfer(address indexed from, address indexed to, uint256 indexed tokenId)';
export const ABI_TEXT_SWAP = 'Swap(address indexed sender, uint256 amount0In, uint256 amount1In, uint256 amount0Out, uint256 amount1Out, address indexed to)';
export const ABI_TEXT_DEPOSIT = 'Deposit(address indexed user, uint256 indexed pid, uint256 amount)';

/** topic_0 of the unnamed (no ABI known) log that pool p emits. */
export function unnamedTopic(c: Chain, pool: number): string {
  let s = '0x';
  for (let j = 0; j < 8; j++) s += word8(hash3(c.kVal ^ 0xa0a0, pool, j));
  return s;
}

const ERC20_ABI: AbiItem[] = [
  ctor([p('name_', 'string'), p('symbol_', 'string')]),
  ev('Approval', [p('owner', 'address', true), p('spender', 'address', true), p('value', 'uint256', false)]),
  ev('Transfer', [p('from', 'address', true), p('to', 'address', true), p('value', 'uint256', false)]),
  fn('allowance', [p('owner', 'address'), p('spender', 'address')], [p('', 'uint256')], 'view'),
  fn('approve', [p('spender', 'address'), p('amount', 'uint256')], [p('', 'bool')], 'nonpayable'),
  fn('balanceOf', [p('account', 'address')], [p('', 'uint256')], 'view'),
  fn('decimals', [], [p('', 'uint8')], 'view'),
  fn('mint', [], [], 'nonpayable'),
  fn('name', [], [p('', 'string')], 'view'),
  fn('symbol', [], [p('', 'string')], 'view'),
  fn('totalSupply', [], [p('', 'uint256')], 'view'),
  fn('transfer', [p('to', 'address'), p('amount', 'uint256')], [p('', 'bool')], 'nonpayable'),
  fn('transferFrom', [p('from', 'address'), p('to', 'address'), p('amount', 'uint256')], [p('', 'bool')], 'nonpayable'),
];
const ERC721_ABI: AbiItem[] = [
  ctor([p('name_', 'string'), p('symbol_', 'string')]),
  ev('Approval', [p('owner', 'address', true), p('approved', 'address', true), p('tokenId', 'uint256', true)]),
  ev('ApprovalForAll', [p('owner', 'address', true), p('operator', 'address', true), p('approved', 'bool', false)]),
  ev('Transfer', [p('from', 'address', true), p('to', 'address', true), p('tokenId', 'uint256', true)]),
  fn('balanceOf', [p('owner', 'address')], [p('', 'uint256')], 'view'),
  fn('mint', [p('to', 'address')], [], 'nonpayable'),
  fn('ownerOf', [p('tokenId', 'uint256')], [p('', 'address')], 'view'),
  fn('tokenURI', [p('tokenId', 'uint256')], [p('', 'string')], 'view'),
  fn('transferFrom', [p('from', 'address'), p('to', 'address'), p('tokenId', 'uint256')], [], 'nonpayable'),
];
const POOL_ABI: AbiItem[] = [
  ctor([p('token0_', 'address'), p('token1_', 'address')]),
  ev('Swap', [
    p('sender', 'address', true),
    p('amount0In', 'uint256', false),
    p('amount1In', 'uint256', false),
    p('amount0Out', 'uint256', false),
    p('amount1Out', 'uint256', false),
    p('to', 'address', true),
  ]),
  fn('getReserves', [], [p('reserve0', 'uint112'), p('reserve1', 'uint112'), p('blockTimestampLast', 'uint32')], 'view'),
  fn(
    'swapExactTokensForTokens',
    [p('amountIn', 'uint256'), p('amountOutMin', 'uint256'), p('path', 'address[]'), p('to', 'address'), p('deadline', 'uint256')],
    [p('amounts', 'uint256[]')],
    'payable',
  ),
];
const STAKING_ABI: AbiItem[] = [
  ctor([p('rewardToken_', 'address')]),
  ev('Deposit', [p('user', 'address', true), p('pid', 'uint256', true), p('amount', 'uint256', false)]),
  fn('deposit', [p('pid', 'uint256'), p('amount', 'uint256')], [], 'payable'),
  fn('pendingReward', [p('pid', 'uint256'), p('user', 'address')], [p('', 'uint256')], 'view'),
];
const VAULT_ABI: AbiItem[] = [
  ctor([p('owner_', 'address')]),
  ev('Withdrawn', [p('to', 'address', true), p('amount', 'uint256', false)]),
  fn('owner', [], [p('', 'address')], 'view'),
  fn('withdraw', [p('amount', 'uint256')], [], 'nonpayable'),
];

export function contractKind(i: number): 'erc20' | 'erc721' | 'pool' | 'staking' | 'created' | null {
  if (i >= A_ERC20_0 && i < A_ERC20_0 + N_ERC20) return 'erc20';
  if (i >= A_ERC721_0 && i < A_ERC721_0 + N_ERC721) return 'erc721';
  if (i >= A_POOL0 && i < A_POOL0 + N_POOLS) return 'pool';
  if (i === A_STAKING) return 'staking';
  if (i >= A_CREATED0) return 'created';
  return null;
}

export function abiOf(i: number): AbiItem[] {
  switch (contractKind(i)) {
    case 'erc20':
      return ERC20_ABI;
    case 'erc721':
      return ERC721_ABI;
    case 'pool':
      return POOL_ABI;
    case 'staking':
      return STAKING_ABI;
    default:
      return i === A_MULTI ? multiAbi() : i === A_SHOWCASE ? showcaseAbi() : VAULT_ABI;
  }
}

export function contractName(i: number): string {
  switch (contractKind(i)) {
    case 'erc20':
      return (ERC20_META[i - A_ERC20_0]!.symbol ?? 'Token') + 'Token';
    case 'erc721':
      return (ERC721_META[i - A_ERC721_0]!.symbol ?? 'Collectible') + 'NFT';
    case 'pool':
      return 'SwapPair';
    case 'staking':
      return 'StakingPool';
    default:
      return i === A_MULTI ? 'MultiToken' : i === A_SHOWCASE ? 'Showcase' : 'Vault';
  }
}

function sourceOf(i: number): string {
  const name = contractName(i);
  return `// SPDX-License-Identifier: MIT\npragma solidity ^0.8.19;\n\n/// @title ${name} (synthetic source of the chainlake simulator)\ncontract ${name} {\n    // ${abiOf(i).length} ABI items\n}\n`;
}

export function contractCode(c: Chain, i: number): string {
  let s = '0x608060405234801561001057600080fd5b50600436106100';
  const n = 64 + (hash2(c.kAddr, i) % 96);
  for (let j = 0; j < n; j++) s += word8(hash3(c.kAddr ^ 0xc0de, i, j));
  return s;
}

export interface VerifiedRecord {
  contract_name: string;
  compiler: string;
  runs_optimizer: string;
  optimization_enabled: string;
  contract_source: string;
  constructor_arguments: string;
  libraries: string;
  verify_date: string;
}

/** The verified record of contract i, or null when unverified. */
export function verifiedRecord(c: Chain, i: number, runtime: Map<string, VerifiedRecord>): VerifiedRecord | null {
  const r = runtime.get(c.addrLower(i));
  if (r) return r;
  if (!isVerifiedAtGenesis(i)) return null;
  const ct = c.creationTx(i);
  const b = ct === 0xffffffff ? 1 : c.txBlk[ct]!;
  return {
    contract_name: contractName(i),
    compiler: ['v0.8.19+commit.7dd6d404', 'v0.8.20+commit.a1b79de6', 'v0.6.12+commit.27d51765'][i % 3]!,
    runs_optimizer: i % 4 === 0 ? '0' : '200',
    optimization_enabled: i % 4 === 0 ? '0' : '1',
    contract_source: Buffer.from(sourceOf(i), 'utf8').toString('base64'),
    constructor_arguments: '000000000000000000000000' + c.addrLower(18).slice(2),
    libraries: '[]',
    verify_date: new Date((c.blockSeconds(b) + 3600) * 1000).toISOString().slice(0, 19) + 'Z',
  };
}
