// The listing scanner's CPU alone (src/extract/scan.ts), on synthetic explorer pages: 20 pages of 1000 transactions
// (string fields, some escaped, nested arrays and objects, unknown keys), each scanned 10 times per round.
// Compare builds by running it in each tree, alternated, a process per run:
// npm run build --silent && npx tsc -p bench/tsconfig.json && node dist/bench-build/bench/micro/scan.js [rounds]

import { scanList } from '../../src/extract/scan.js';

let seed = 7;
const random = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
const hex = (n: number): string => '0x' + Array.from({ length: n }, () => '0123456789abcdef'[Math.floor(random() * 16)]).join('');

function transaction(i: number): Record<string, unknown> {
  return {
    blockHash: hex(64),
    blockNumber: String(1_000_000 + i),
    confirmations: '12',
    contractAddress: '',
    cumulativeGasUsed: '1234567',
    from: hex(40),
    gas: '21000',
    gasPrice: '1000000000',
    gasUsed: '21000',
    hash: hex(64),
    input: i % 7 ? '0x' : hex(200),
    isError: '0',
    nonce: String(i),
    timeStamp: String(1_700_000_000 + i),
    to: hex(40),
    transactionIndex: String(i % 100),
    txreceipt_status: '1',
    value: String(Math.floor(random() * 1e18)),
    methodId: '0x',
    functionName: i % 5 ? '' : 'transfer(address to, uint256 "x")',
    topics: i % 3 ? [hex(64), hex(64), null] : [],
    extra: { nested: [1, 2.5e3, true, false, null, { k: 'v' }] },
  };
}

const FIELDS = ['blockNumber', 'timeStamp', 'hash', 'from', 'to', 'value', 'gas', 'gasPrice', 'isError', 'input', 'topics', 'functionName', 'transactionIndex'];
const pages = Array.from({ length: 20 }, (_, p) =>
  Buffer.from(JSON.stringify({ status: '1', message: 'OK', result: Array.from({ length: 1000 }, (_, i) => transaction(p * 1000 + i)) })),
);
const megabytes = (pages.reduce((s, b) => s + b.length, 0) * 10) / 1e6;

/** CPU milliseconds of one round: every page scanned 10 times. */
function round(): number {
  const t0 = process.cpuUsage();
  for (let r = 0; r < 10; r++) for (const page of pages) if (scanList(page, ['result'], FIELDS)?.count !== 1000) throw new Error('scan: a page was refused');
  const t = process.cpuUsage(t0);
  return (t.user + t.system) / 1000;
}

const rounds = Number(process.argv[2] ?? 7);
for (let i = 0; i < 3; i++) round();
const times = Array.from({ length: rounds }, round).sort((a, b) => a - b);
process.stdout.write(
  `scanList: ${megabytes.toFixed(0)} MB per round, median ${times[rounds >> 1]!.toFixed(0)} ms CPU, min ${times[0]!.toFixed(0)} ms (${rounds} rounds)\n`,
);
