import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import type { CallerCache } from './caller-cache.js';
import type { CallerChanges } from './caller-changes.js';
import { accountErrors } from './errors.js';
import { hashApiKey, newApiKey } from './keys.js';
import { toPlan, type Plan } from './plans.js';

/** Who is calling: the account behind a valid API key, with its current plan. */
export interface Caller {
  accountId: number;
  plan: Plan;
}

export interface AccountServiceOptions {
  /** Valid keys' callers, for a short time; absent: every request reads the database. */
  cache?: CallerCache;
  /** Told after every change that affects a cached caller. */
  changes?: CallerChanges;
}

export class AccountService {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly options: AccountServiceOptions = {},
  ) {}

  /**
   * The caller for an API key, or undefined when the key is unknown or
   * revoked. From the cache when it has the key; the database lookup is a
   * findUnique, which Prisma batches across concurrent requests.
   */
  async authenticate(apiKey: string): Promise<Caller | undefined> {
    const hash = hashApiKey(apiKey);
    const { cache } = this.options;
    const cached = cache?.get(hash);
    if (cached) return cached;
    const generation = cache?.generation ?? 0;
    const row = await this.prisma.apiKey.findUnique({
      where: { hash },
      select: { revokedAt: true, account: { select: { id: true, plan: true } } },
    });
    if (!row || row.revokedAt) return undefined;
    const caller = { accountId: row.account.id, plan: toPlan(row.account.plan) };
    cache?.set(hash, caller, generation);
    return caller;
  }

  async create(input: { plan: string; email?: string }): Promise<{ accountId: number; plan: string; apiKey: string }> {
    const plan = await this.findPlan(input.plan);
    const key = newApiKey();
    try {
      const account = await this.prisma.account.create({
        data: { email: input.email, planId: plan.id, apiKeys: { create: { hash: key.hash, prefix: key.prefix } } },
      });
      return { accountId: account.id, plan: plan.name, apiKey: key.key };
    } catch (err) {
      if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002') throw accountErrors.emailTaken();
      throw err;
    }
  }

  /** Revokes every key of the account and issues a new one, in one transaction. */
  async rotateKey(accountId: number): Promise<{ accountId: number; apiKey: string }> {
    const key = newApiKey();
    await this.prisma.$transaction(async (tx) => {
      const account = await tx.account.findUnique({ where: { id: accountId }, select: { id: true } });
      if (!account) throw accountErrors.accountNotFound();
      await tx.apiKey.updateMany({ where: { accountId, revokedAt: null }, data: { revokedAt: new Date() } });
      await tx.apiKey.create({ data: { accountId, hash: key.hash, prefix: key.prefix } });
    });
    await this.options.changes?.accountChanged(accountId);
    return { accountId, apiKey: key.key };
  }

  async changePlan(accountId: number, planName: string): Promise<{ accountId: number; plan: string }> {
    const plan = await this.findPlan(planName);
    const { count } = await this.prisma.account.updateMany({ where: { id: accountId }, data: { planId: plan.id } });
    if (count === 0) throw accountErrors.accountNotFound();
    await this.options.changes?.accountChanged(accountId);
    return { accountId, plan: plan.name };
  }

  private async findPlan(name: string) {
    const plan = await this.prisma.plan.findUnique({ where: { name } });
    if (!plan) throw accountErrors.planNotFound(name);
    return plan;
  }
}
