// The account's webhook endpoints (the /api/v1/webhooks routes): create with
// a secret shown once, list, delete, rotate the secret, and the endpoint's
// recent deliveries. Another account's endpoint is "not found", never "forbidden".
import { auditRow, auditSql, SYSTEM, type Actor } from '../audit/actor.js';
import { randomBytes } from 'node:crypto';
import type { PrismaClient } from '../generated/prisma/client.js';
import { webhookErrors } from './errors.js';
import type { EventType } from './events.js';
import { newSecret } from './signature.js';

/** Endpoints one account may have: enough for a few integrations, few enough that one event fans out to a bounded number of deliveries. */
export const MAX_WEBHOOKS_PER_ACCOUNT = 10;

/** How long the secret before a rotation keeps signing alongside the new one. */
export const ROTATION_OVERLAP_MS = 24 * 3600 * 1000;

/** Deliveries GET .../deliveries shows: the newest. */
export const DELIVERIES_SHOWN = 50;

export interface WebhookEndpoint {
  id: string;
  url: string;
  events: EventType[];
  createdAt: Date;
  disabledAt: Date | null;
  /** While it rests after sends that timed out again and again (relay.ts); null otherwise. */
  pausedUntil: Date | null;
}

export interface Delivery {
  id: string;
  type: string;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  nextAttemptAt: Date | null;
  deliveredAt: Date | null;
  createdAt: Date;
}

const SHOWN = { id: true, url: true, events: true, createdAt: true, disabledAt: true, pausedUntil: true } as const;

const newEndpointId = () => `wh_${randomBytes(12).toString('base64url')}`;

export class WebhookEndpoints {
  constructor(private readonly prisma: PrismaClient) {}

  /** A new endpoint and its secret (the only time the secret leaves the server). */
  async create(accountId: number, url: string, events: EventType[], actor: Actor = SYSTEM): Promise<WebhookEndpoint & { secret: string }> {
    const secret = newSecret();
    // The account's row is locked while counting, so two creates at once cannot both pass the cap.
    const row = await this.prisma.$transaction(async (tx) => {
      await tx.$queryRaw`SELECT id FROM accounts WHERE id = ${accountId} FOR UPDATE`;
      const count = await tx.webhookEndpoint.count({ where: { accountId } });
      if (count >= MAX_WEBHOOKS_PER_ACCOUNT) throw webhookErrors.limit(MAX_WEBHOOKS_PER_ACCOUNT);
      const now = new Date();
      const created = await tx.webhookEndpoint.create({ data: { id: newEndpointId(), accountId, url, events, secret, createdAt: now }, select: SHOWN });
      await tx.auditEvent.create({ data: auditRow(accountId, 'webhook.created', created.id, actor, now) });
      return created;
    });
    return { ...(row as WebhookEndpoint), secret };
  }

  async list(accountId: number): Promise<WebhookEndpoint[]> {
    const rows = await this.prisma.webhookEndpoint.findMany({ where: { accountId }, select: SHOWN, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
    return rows as WebhookEndpoint[];
  }

  /** Removes the endpoint and its undelivered messages (they cascade). */
  async delete(accountId: number, id: string, actor: Actor = SYSTEM): Promise<void> {
    const rows = await this.prisma.$queryRaw<{ id: string }[]>`
      WITH removed AS (DELETE FROM webhook_endpoints WHERE id = ${id} AND account_id = ${accountId} RETURNING id, account_id),
      audited AS (${auditSql('webhook.deleted', 'removed', 'account_id', 'id', actor, new Date())})
      SELECT id FROM removed`;
    if (rows.length === 0) throw webhookErrors.notFound();
  }

  /** A new secret; the current one keeps signing alongside it for ROTATION_OVERLAP_MS. */
  async rotateSecret(accountId: number, id: string, actor: Actor = SYSTEM): Promise<WebhookEndpoint & { secret: string }> {
    const secret = newSecret();
    const now = new Date();
    const until = new Date(now.getTime() + ROTATION_OVERLAP_MS);
    // One statement: the old secret read and moved in the same row update, and its audit row.
    const rows = await this.prisma.$queryRaw<{ id: string }[]>`
      WITH rotated AS (
        UPDATE webhook_endpoints SET previous_secret = secret, previous_secret_until = ${until}::timestamp(3), secret = ${secret}
        WHERE id = ${id} AND account_id = ${accountId} RETURNING id, account_id
      ), audited AS (${auditSql('webhook.secret_rotated', 'rotated', 'account_id', 'id', actor, now)})
      SELECT id FROM rotated`;
    if (rows.length === 0) throw webhookErrors.notFound();
    const row = await this.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id }, select: SHOWN });
    return { ...(row as WebhookEndpoint), secret };
  }

  /** The newest deliveries of the account's endpoint. */
  async deliveries(accountId: number, id: string): Promise<Delivery[]> {
    const endpoint = await this.prisma.webhookEndpoint.findFirst({ where: { id, accountId }, select: { id: true } });
    if (!endpoint) throw webhookErrors.notFound();
    return this.prisma.webhookMessage.findMany({
      where: { endpointId: id },
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      take: DELIVERIES_SHOWN,
      select: { id: true, type: true, attempts: true, lastStatus: true, lastError: true, nextAttemptAt: true, deliveredAt: true, createdAt: true },
    });
  }
}
