// What an account holds, read from the database itself rather than through
// the API's counters: file rows, pending records (an upload in flight or one
// whose clean-up is still owed) and daily upload slots taken.
import type { TestServer } from './server.js';

export interface AccountState {
  rows: number;
  pending: number;
  quota: number;
}

export async function accountState(t: TestServer, accountId: number): Promise<AccountState> {
  const { prisma } = t.server.db;
  const [rows, pending, quota] = await Promise.all([
    prisma.file.count({ where: { accountId } }),
    prisma.pendingObject.count({ where: { accountId } }),
    prisma.dailyUpload.aggregate({ where: { accountId }, _sum: { count: true } }),
  ]);
  return { rows, pending, quota: quota._sum.count ?? 0 };
}
