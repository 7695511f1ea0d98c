// Finance analytics API (placeholder until implemented).
import { Chain } from './chain.js';

export interface FinanceResponse { status: number; body: string; rows: number; route: string }

export function financeFailure(status: number, message: string, route = 'unknown'): FinanceResponse {
  return { status, body: JSON.stringify({ type: 'failure', message, data: null }), rows: 0, route };
}

export function handleFinance(_chain: Chain, method: string, segs: string[], _q: URLSearchParams): FinanceResponse {
  return financeFailure(404, `Unknown path ${method} /${segs.join('/')}`);
}
