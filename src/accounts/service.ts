import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import { uploadsInProgress } from '../ledger/ledger.js';
import type { CallerCache } from './caller-cache.js';
import type { CallerChanges } from './caller-changes.js';
import { accountErrors } from './errors.js';
import { hashApiKey, newApiKey } from './keys.js';
import { toPlan } from './plans.js';
import type { Caller } from './types.js';
import type { LastUsed } from './last-used.js';
import { auditRow, SYSTEM, type Actor } from '../audit/actor.js';
import { systemClock, type Clock } from '../clock.js';

export type { Caller } from './types.js';

/** A valid API key's account and plan, as authenticate() reads them. */
interface KeyRow {
  key_id: number;
  public_id: string;
  key_name: string | null;
  full: boolean;
  scopes: string[] | null;
  expires_at: Date | null;
  allowed_cidrs: string[] | null;
  account_id: number;
  name: string;
  api_access: boolean;
  requests_per_minute: number;
  requests_per_day: number;
  max_file_size: bigint;
  daily_uploads: number;
  concurrent_uploads: number | null;
  max_total_size: bigint | null;
  max_expires_in: number | null;
}

const planOf = (row: KeyRow) =>
  toPlan({
    name: row.name,
    apiAccess: row.api_access,
    requestsPerMinute: row.requests_per_minute,
    requestsPerDay: row.requests_per_day,
    maxFileSize: BigInt(row.max_file_size),
    dailyUploads: row.daily_uploads,
    concurrentUploads: row.concurrent_uploads,
    maxTotalSize: row.max_total_size === null ? null : BigInt(row.max_total_size),
    maxExpiresIn: row.max_expires_in,
  });

/** An account as `GET /admin/accounts` lists it. */
export interface AccountSummary {
  accountId: number;
  email: string | null;
  plan: string;
  createdAt: Date;
  fileCount: number;
  totalBytes: number;
}

export interface AccountServiceOptions {
  /** Valid keys' callers, for a short time; absent: every request reads the database. */
  cache?: CallerCache;
  /** Told after every change that affects a cached caller. */
  changes?: CallerChanges;
  /** Writes keys' last_used_at (at most once a minute each); absent: not written. */
  lastUsed?: LastUsed;
  /** Judges keys' expiry, cached or read (the composition root's clock). */
  clock?: Clock;
}

const used = (caller: Caller, lastUsed: LastUsed | undefined): Caller => {
  lastUsed?.touch(caller.key!.id);
  return caller;
};

export class AccountService {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly options: AccountServiceOptions = {},
  ) {}

  /**
   * The caller for an API key, or undefined when the key is unknown or
   * revoked. From the cache when it has the key; otherwise one query on the
   * key's hash that answers no row for both a revoked key and an unknown one,
   * so they take the same path and the same time (issue 27: a findUnique with
   * the account and plan read those in queries of their own whenever the key
   * row existed, so a revoked key answered 1.5-1.8x slower and told an
   * attacker which keys had once been valid; a query returning the revoked
   * row to be judged after still measured up to 1.18x on PGlite, decoding it).
   */
  async authenticate(apiKey: string): Promise<Caller | undefined> {
    const hash = hashApiKey(apiKey);
    const { cache, lastUsed, clock = systemClock } = this.options;
    const cached = cache?.get(hash);
    // An expired key stays in the cache until its entry does, but is refused from the instant it expires, on every instance.
    if (cached) return cached.key!.expiresAt !== null && cached.key!.expiresAt <= clock().getTime() ? undefined : used(cached, lastUsed);
    const generation = cache?.generation ?? 0;
    // Expired keys answer no row, as revoked and unknown ones do (the same path, the same time).
    const rows = await this.prisma.$queryRaw<KeyRow[]>`
      SELECT k.id AS key_id, k.public_id, k.name AS key_name, k.full, k.scopes, k.expires_at, k.allowed_cidrs,
             a.id AS account_id, p.name, p.api_access, p.requests_per_minute, p.requests_per_day,
             p.max_file_size, p.daily_uploads, p.concurrent_uploads, p.max_total_size, p.max_expires_in
      FROM api_keys k JOIN accounts a ON a.id = k.account_id JOIN plans p ON p.id = a.plan_id
      WHERE k.hash = ${hash} AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > ${clock()}::timestamp(3))`;
    const row = rows[0];
    if (!row) return undefined;
    const caller: Caller = {
      accountId: row.account_id,
      plan: planOf(row),
      key: {
        id: row.key_id,
        publicId: row.public_id,
        name: row.key_name,
        full: row.full,
        scopes: row.full ? [] : (row.scopes ?? []),
        expiresAt: row.expires_at === null ? null : row.expires_at.getTime(),
        allowedCidrs: row.allowed_cidrs ?? [],
      },
    };
    cache?.set(hash, caller, generation);
    return used(caller, lastUsed);
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

  async changePlan(accountId: number, planName: string, actor: Actor = SYSTEM): Promise<{ accountId: number; plan: string }> {
    const plan = await this.findPlan(planName);
    await this.prisma.$transaction(async (tx) => {
      const { count } = await tx.account.updateMany({ where: { id: accountId }, data: { planId: plan.id } });
      if (count === 0) throw accountErrors.accountNotFound();
      await tx.auditEvent.create({ data: auditRow(accountId, 'plan.changed', plan.name, actor, new Date()) });
    });
    await this.options.changes?.accountChanged(accountId);
    return { accountId, plan: plan.name };
  }

  /** A page of accounts, oldest first, with their plan and what they store (the counters `dropstream gc` keeps true); and how many there are. */
  async list(page: number, limit: number): Promise<{ accounts: AccountSummary[]; total: number }> {
    const [rows, total] = await Promise.all([
      this.prisma.account.findMany({
        orderBy: { id: 'asc' },
        skip: (page - 1) * limit,
        take: limit,
        select: { id: true, email: true, createdAt: true, fileCount: true, totalBytes: true, plan: { select: { name: true } } },
      }),
      this.prisma.account.count(),
    ]);
    const accounts = rows.map((row) => ({ accountId: row.id, email: row.email, plan: row.plan.name, createdAt: row.createdAt, fileCount: row.fileCount, totalBytes: Number(row.totalBytes) }));
    return { accounts, total };
  }

  /**
   * Deletes an account that holds nothing: no files, no upload in progress
   * (its pending objects would outlive the account's rows, and its stored
   * bytes would be nobody's). Its keys stop working at once. For
   * `dropstream loadtest --setup`, which removes its own account after
   * deleting its files, and for a website's backend closing an account.
   */
  async remove(accountId: number): Promise<void> {
    await this.prisma.$transaction(async (tx) => {
      const account = await tx.account.findUnique({ where: { id: accountId }, select: { id: true } });
      if (!account) throw accountErrors.accountNotFound();
      const files = await tx.file.count({ where: { accountId } });
      const uploads = await uploadsInProgress(tx, accountId);
      if (files > 0 || uploads > 0) throw accountErrors.accountNotEmpty(files, uploads);
      // Keys, daily counters and finished resumable records go with it (onDelete: Cascade).
      await tx.account.delete({ where: { id: accountId } });
    });
    await this.options.changes?.accountChanged(accountId);
  }

  private async findPlan(name: string) {
    const plan = await this.prisma.plan.findUnique({ where: { name } });
    if (!plan) throw accountErrors.planNotFound(name);
    return plan;
  }
}
