// The account's API keys as its owner manages them (issue 57): make one with
// scopes, an expiry and address ranges; list them; revoke one. The operator's
// `keys rotate` (AccountService.rotateKey) stays: it revokes every key and
// makes one full key, the way back in for an owner who lost theirs.
import type { PrismaClient } from '../generated/prisma/client.js';
import type { CallerChanges } from '../accounts/caller-changes.js';
import { within } from '../accounts/cidr.js';
import { accountErrors } from '../accounts/errors.js';
import { newApiKey } from '../accounts/keys.js';
import { holds, type Scope } from '../accounts/scopes.js';
import type { CallerKey } from '../accounts/types.js';
import { auditRow, SYSTEM, type Actor } from '../audit/actor.js';
import { systemClock, type Clock } from '../clock.js';

/** Keys an account may have at once (not revoked, expired ones included until revoked). */
export const MAX_KEYS = 50;

export interface NewKey {
  name: string;
  /** 'full', or the scopes (known, distinct, at least one). */
  scopes: 'full' | Scope[];
  /** Seconds from now; absent: never (or the making key's expiry, if it has one). */
  expiresIn?: number;
  /** Normal CIDR ranges; absent or empty: anywhere (or the making key's ranges, if it has some). */
  allowedCidrs?: string[];
}

export interface KeySummary {
  id: string;
  name: string | null;
  full: boolean;
  scopes: string[];
  prefix: string;
  createdAt: Date;
  expiresAt: Date | null;
  lastUsedAt: Date | null;
  allowedCidrs: string[];
  /** The key of the request that listed it. */
  current: boolean;
}

const summaryFields = { id: true, publicId: true, name: true, full: true, scopes: true, prefix: true, createdAt: true, expiresAt: true, lastUsedAt: true, allowedCidrs: true } as const;

type Row = { id: number; publicId: string; name: string | null; full: boolean; scopes: string[] | null; prefix: string; createdAt: Date; expiresAt: Date | null; lastUsedAt: Date | null; allowedCidrs: string[] | null };

const summary = (row: Row, current: CallerKey): KeySummary => ({
  id: row.publicId,
  name: row.name,
  full: row.full,
  scopes: row.full ? [] : (row.scopes ?? []),
  prefix: row.prefix,
  createdAt: row.createdAt,
  expiresAt: row.expiresAt,
  lastUsedAt: row.lastUsedAt,
  allowedCidrs: row.allowedCidrs ?? [],
  current: row.id === current.id,
});

export class ApiKeys {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly changes?: CallerChanges,
    private readonly clock: Clock = systemClock,
  ) {}

  /**
   * Makes a key no wider than `maker`, the key of the request: only scopes it
   * holds (a full key only from a full key), never outliving it, and only
   * from addresses it may be used from. Answers the secret, once.
   */
  async create(accountId: number, maker: CallerKey, input: NewKey, actor: Actor = SYSTEM): Promise<KeySummary & { secret: string }> {
    const full = input.scopes === 'full';
    if (full && !maker.full) throw accountErrors.insufficientScope('*', 'only a full key can make a full key');
    if (!full) {
      const missing = (input.scopes as Scope[]).find((scope) => !holds(maker, scope));
      if (missing) throw accountErrors.insufficientScope(missing, 'a key cannot make a key with a scope it does not hold');
    }
    const now = this.clock().getTime();
    let expiresAt = input.expiresIn === undefined ? null : now + input.expiresIn * 1000;
    if (maker.expiresAt !== null) {
      if (expiresAt !== null && expiresAt > maker.expiresAt) throw accountErrors.keyExceedsCreator(`expires_in: the new key cannot outlive this key, which expires at ${new Date(maker.expiresAt).toISOString()}`);
      expiresAt ??= maker.expiresAt;
    }
    let cidrs = input.allowedCidrs ?? [];
    if (maker.allowedCidrs.length > 0) {
      if (cidrs.length === 0) cidrs = [...maker.allowedCidrs];
      const outside = cidrs.find((cidr) => !maker.allowedCidrs.some((outer) => within(cidr, outer)));
      if (outside !== undefined) throw accountErrors.keyExceedsCreator(`allowed_cidrs: ${outside} is not within this key's ranges (${maker.allowedCidrs.join(', ')})`);
    }
    const key = newApiKey();
    const row = await this.prisma.$transaction(async (tx) => {
      // One owner's creates and revokes take turns (the key limit, the last full key).
      await tx.$executeRaw`SELECT id FROM accounts WHERE id = ${accountId} FOR UPDATE`;
      const count = await tx.apiKey.count({ where: { accountId, revokedAt: null } });
      if (count >= MAX_KEYS) throw accountErrors.keyLimit(MAX_KEYS);
      const created = await tx.apiKey.create({
        data: {
          accountId,
          hash: key.hash,
          prefix: key.prefix,
          name: input.name,
          full,
          scopes: input.scopes === 'full' ? [] : input.scopes,
          expiresAt: expiresAt === null ? null : new Date(expiresAt),
          allowedCidrs: cidrs,
        },
        select: summaryFields,
      });
      await tx.auditEvent.create({ data: auditRow(accountId, 'key.created', created.publicId, actor, new Date(now)) });
      return created;
    });
    return { ...summary(row, maker), current: false, secret: key.key };
  }

  /** The account's keys that are not revoked (expired ones too, until revoked), newest first. */
  async list(accountId: number, current: CallerKey): Promise<KeySummary[]> {
    const rows = await this.prisma.apiKey.findMany({ where: { accountId, revokedAt: null }, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], select: summaryFields });
    return rows.map((row) => summary(row, current));
  }

  /**
   * Revokes one key, on every instance at once (the caller cache's change
   * notice; its TTL if the notice is lost). A key may revoke only keys no
   * wider than itself, and the account's last full key that never expires
   * is never revoked here (409 last_full_key): without it nobody could
   * make a full key again; the operator's `dropstream keys rotate` can.
   */
  async revoke(accountId: number, revoker: CallerKey, publicId: string, actor: Actor = SYSTEM): Promise<void> {
    await this.prisma.$transaction(async (tx) => {
      await tx.$executeRaw`SELECT id FROM accounts WHERE id = ${accountId} FOR UPDATE`;
      const target = await tx.apiKey.findFirst({ where: { publicId, accountId, revokedAt: null }, select: { id: true, full: true, scopes: true, expiresAt: true } });
      if (!target) throw accountErrors.keyNotFound();
      if (target.full && !revoker.full) throw accountErrors.insufficientScope('*', 'only a full key can revoke a full key');
      const wider = target.full ? undefined : (target.scopes ?? []).find((scope) => !holds(revoker, scope as Scope));
      if (wider !== undefined) throw accountErrors.insufficientScope(wider as Scope, 'a key cannot revoke a key with a scope it does not hold');
      if (target.full && target.expiresAt === null) {
        const others = await tx.apiKey.count({ where: { accountId, revokedAt: null, full: true, expiresAt: null, id: { not: target.id } } });
        if (others === 0) throw accountErrors.lastFullKey();
      }
      const now = this.clock();
      await tx.apiKey.update({ where: { id: target.id }, data: { revokedAt: now } });
      await tx.auditEvent.create({ data: auditRow(accountId, 'key.revoked', publicId, actor, now) });
    });
    await this.changes?.accountChanged(accountId);
  }
}
