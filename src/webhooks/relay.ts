// The relay: runs on every instance, claims due messages of the outbox
// (webhook_messages) with FOR UPDATE SKIP LOCKED so instances take different
// ones, POSTs them signed (send.ts, signature.ts) and settles each: delivered
// on 2xx, else tried again after an exponential backoff with jitter, until
// WEBHOOK_RETRY_HOURS after the event; then the message is given up and its
// endpoint disabled, unless something reached it since.
//
// A claim moves next_attempt_at past the send's deadline (a lease), so a
// message is never sent by two instances at once, and one whose instance
// died is sent again once the lease ends: at least once.
import type { Logger } from 'pino';
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import { createAgents, send, type Agents } from './send.js';
import { signatureHeader } from './signature.js';

export interface RelayOptions {
  prisma: PrismaClient;
  logger: Logger;
  /** WEBHOOK_ALLOW_PRIVATE: deliveries may go to loopback and private addresses. */
  allowPrivate: boolean;
  /** WEBHOOK_MAX_BACKOFF, in ms: the longest wait between two tries. */
  maxBackoffMs: number;
  /** WEBHOOK_RETRY_HOURS, in ms: how long after its event a message is tried. */
  retryWindowMs: number;
  /** The first backoff (1 s); the wait doubles with each try up to maxBackoffMs. */
  baseBackoffMs?: number;
  /** A send's deadline over the whole exchange (10 s). */
  timeoutMs?: number;
  /** How often an idle relay looks for due messages (1 s). */
  pollMs?: number;
  /** Sends in flight on this instance, over all endpoints. */
  concurrency?: number;
  /** Sends in flight on this instance to one endpoint. */
  perEndpoint?: number;
  /** Told how each try ended (the composition root counts them in /metrics). */
  onOutcome?: (outcome: 'delivered' | 'failed' | 'given_up') => void;
  /** How long a settled message (delivered or given up) is kept for GET .../deliveries (30 days). */
  keepMs?: number;
  /** How often settled messages past keepMs are deleted (an hour). */
  pruneEveryMs?: number;
}

/** Defaults, documented in docs/webhooks.md. */
export const RELAY_DEFAULTS = {
  baseBackoffMs: 1000,
  timeoutMs: 10_000,
  pollMs: 1000,
  concurrency: 16,
  perEndpoint: 4,
  onOutcome: () => {},
  keepMs: 30 * 86_400_000,
  pruneEveryMs: 3_600_000,
};

/** Due messages read per look (at most perEndpoint of each endpoint). */
const CANDIDATES = 100;

/** How long past the send's deadline a claim holds (the settle's own round trip, a slow database). */
const LEASE_MARGIN_MS = 30_000;

interface Claimed {
  id: string;
  endpoint_id: string;
  body: string;
  attempts: number;
  created_at: Date;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: Date | null;
}

/** The wait before try `attempts + 1`: base x 2^(attempts-1), capped, then between half and all of it ("equal jitter"). */
export function backoffMs(attempts: number, baseMs: number, maxMs: number, random = Math.random): number {
  const full = Math.min(maxMs, baseMs * 2 ** Math.min(attempts - 1, 30));
  return Math.round(full / 2 + (random() * full) / 2);
}

export class Relay {
  private readonly options: Required<RelayOptions>;
  private readonly agents: Agents;
  private readonly perEndpoint = new Map<string, number>();
  private readonly sends = new Set<Promise<void>>();
  private readonly stopping = new AbortController();
  private inFlight = 0;
  private timer?: NodeJS.Timeout;
  private pruner?: NodeJS.Timeout;
  private looking?: Promise<void>;
  private again = false;

  constructor(options: RelayOptions) {
    this.options = { ...RELAY_DEFAULTS, ...options };
    this.agents = createAgents(options.allowPrivate, this.options.perEndpoint);
  }

  start(): void {
    this.timer = setInterval(() => this.wake(), this.options.pollMs).unref();
    // Every upload, download and deletion writes a row per endpoint: without
    // this the outbox would grow for ever.
    this.pruner = setInterval(() => {
      this.prune().catch((err: unknown) => this.options.logger.warn({ err }, 'webhook relay: deleting old settled messages failed'));
    }, this.options.pruneEveryMs).unref();
    this.wake();
  }

  /** Looks for due messages now (one look at a time; a wake during a look makes another after it). */
  wake(): void {
    if (this.stopping.signal.aborted) return;
    if (this.looking) {
      this.again = true;
      return;
    }
    this.looking = this.look()
      .catch((err: unknown) => this.options.logger.warn({ err }, 'webhook relay: looking for due messages failed'))
      .finally(() => {
        this.looking = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  /**
   * Stops looking, cuts the sends in flight and hands their messages back
   * (due at once, for this or another instance), then closes the connections.
   */
  async close(): Promise<void> {
    clearInterval(this.timer);
    clearInterval(this.pruner);
    this.stopping.abort();
    await this.looking;
    await Promise.all(this.sends);
    this.agents.destroy();
  }

  /** Deletes settled messages (delivered or given up: nothing is due) older than keepMs; returns how many. */
  async prune(now = new Date()): Promise<number> {
    const before = new Date(now.getTime() - this.options.keepMs);
    return this.options.prisma.$executeRaw`DELETE FROM webhook_messages WHERE next_attempt_at IS NULL AND created_at < ${before}::timestamp(3)`;
  }

  private async look(): Promise<void> {
    const { prisma, concurrency, perEndpoint } = this.options;
    const free = concurrency - this.inFlight;
    if (free <= 0) return;
    const now = new Date();
    // The oldest few due messages of each endpoint, not the oldest overall: a
    // backlog of one endpoint (a slow receiver, a storm) must not hold back the
    // others' messages behind it (tenants share the relay).
    const due = await prisma.$queryRaw<{ id: string; endpoint_id: string }[]>`
      SELECT id, endpoint_id FROM (
        SELECT m.id, m.endpoint_id, m.next_attempt_at, row_number() OVER (PARTITION BY m.endpoint_id ORDER BY m.next_attempt_at) AS nth
        FROM webhook_messages m JOIN webhook_endpoints e ON e.id = m.endpoint_id AND e.disabled_at IS NULL
        WHERE m.next_attempt_at <= ${now}::timestamp(3)
      ) due WHERE nth <= ${perEndpoint} ORDER BY next_attempt_at LIMIT ${CANDIDATES}`;
    // Per endpoint at most perEndpoint in flight here; the rest wait for a later look.
    const taken = new Map<string, number>();
    const ids: string[] = [];
    for (const row of due) {
      const busy = (this.perEndpoint.get(row.endpoint_id) ?? 0) + (taken.get(row.endpoint_id) ?? 0);
      if (busy >= perEndpoint) continue;
      taken.set(row.endpoint_id, (taken.get(row.endpoint_id) ?? 0) + 1);
      ids.push(row.id);
      if (ids.length >= free) break;
    }
    if (ids.length === 0 || this.stopping.signal.aborted) return;
    const leaseUntil = new Date(now.getTime() + this.options.timeoutMs + LEASE_MARGIN_MS);
    // Rows another instance claimed since (locked, or no longer due) are skipped.
    const claimed = await prisma.$queryRaw<Claimed[]>`
      WITH claimed AS (
        UPDATE webhook_messages SET next_attempt_at = ${leaseUntil}::timestamp(3), attempts = attempts + 1
        WHERE id IN (
          SELECT id FROM webhook_messages WHERE id IN (${Prisma.join(ids)}) AND next_attempt_at <= ${now}::timestamp(3)
          FOR UPDATE SKIP LOCKED
        )
        RETURNING id, endpoint_id, body, attempts, created_at
      )
      SELECT c.*, e.url, e.secret, e.previous_secret, e.previous_secret_until
      FROM claimed c JOIN webhook_endpoints e ON e.id = c.endpoint_id`;
    for (const message of claimed) this.startSend(message);
  }

  private startSend(message: Claimed): void {
    this.inFlight++;
    this.perEndpoint.set(message.endpoint_id, (this.perEndpoint.get(message.endpoint_id) ?? 0) + 1);
    const sending = this.deliver(message)
      .catch((err: unknown) => this.options.logger.warn({ err, message_id: message.id }, 'webhook relay: settling a delivery failed'))
      .finally(() => {
        this.sends.delete(sending);
        this.inFlight--;
        const left = (this.perEndpoint.get(message.endpoint_id) ?? 1) - 1;
        if (left > 0) this.perEndpoint.set(message.endpoint_id, left);
        else this.perEndpoint.delete(message.endpoint_id);
        // A slot is free: the next due message need not wait for the poll.
        this.wake();
      });
    this.sends.add(sending);
  }

  private async deliver(message: Claimed): Promise<void> {
    const { prisma, timeoutMs, logger } = this.options;
    const timestamp = Math.floor(Date.now() / 1000);
    const secrets = [message.secret];
    if (message.previous_secret && message.previous_secret_until && message.previous_secret_until.getTime() > Date.now()) secrets.push(message.previous_secret);
    const headers = {
      'webhook-id': message.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signatureHeader(secrets, message.id, timestamp, message.body),
    };
    const signal = AbortSignal.any([AbortSignal.timeout(timeoutMs), this.stopping.signal]);
    const result = await send(this.agents, message.url, headers, message.body, signal);
    const now = new Date();
    if (result.error === undefined) {
      await prisma.$executeRaw`
        UPDATE webhook_messages SET delivered_at = ${now}::timestamp(3), next_attempt_at = NULL, last_status = ${result.status ?? null}, last_error = NULL
        WHERE id = ${message.id}`;
      this.options.onOutcome('delivered');
      return;
    }
    const error = result.error.slice(0, 500);
    if (this.stopping.signal.aborted) {
      // Cut by a shutdown, not the receiver's fault: due again at once, the try not counted.
      await prisma.$executeRaw`UPDATE webhook_messages SET next_attempt_at = ${now}::timestamp(3), attempts = attempts - 1 WHERE id = ${message.id}`;
      return;
    }
    logger.debug({ message_id: message.id, attempts: message.attempts, status: result.status, error, detail: result.detail }, 'webhook delivery failed');
    const next = new Date(now.getTime() + backoffMs(message.attempts, this.options.baseBackoffMs, this.options.maxBackoffMs));
    if (next.getTime() <= message.created_at.getTime() + this.options.retryWindowMs) {
      // Not when its endpoint was disabled meanwhile (that stopped the message: next_attempt_at NULL).
      await prisma.$executeRaw`
        UPDATE webhook_messages SET next_attempt_at = ${next}::timestamp(3), last_status = ${result.status ?? null}, last_error = ${error}
        WHERE id = ${message.id} AND next_attempt_at IS NOT NULL`;
      this.options.onOutcome('failed');
      return;
    }
    await this.giveUp(message, result.status ?? null, error, now);
    this.options.onOutcome('given_up');
  }

  /**
   * The message's window is over: it is given up, and its endpoint disabled
   * (with its other undelivered messages) unless a delivery to it succeeded
   * since the message's event: a receiver that failed for the whole window.
   */
  private async giveUp(message: Claimed, status: number | null, error: string, now: Date): Promise<void> {
    const rows = await this.options.prisma.$queryRaw<{ disabled: string | null }[]>`
      WITH failed AS (
        UPDATE webhook_messages SET next_attempt_at = NULL, last_status = ${status}, last_error = ${error}
        WHERE id = ${message.id} RETURNING endpoint_id, created_at
      ), disabled AS (
        UPDATE webhook_endpoints e SET disabled_at = ${now}::timestamp(3) FROM failed
        WHERE e.id = failed.endpoint_id AND e.disabled_at IS NULL
          AND NOT EXISTS (SELECT 1 FROM webhook_messages d WHERE d.endpoint_id = e.id AND d.delivered_at >= failed.created_at)
        RETURNING e.id
      ), stopped AS (
        UPDATE webhook_messages SET next_attempt_at = NULL, last_error = 'endpoint disabled'
        WHERE endpoint_id IN (SELECT id FROM disabled) AND id <> ${message.id} AND next_attempt_at IS NOT NULL
      )
      SELECT (SELECT id FROM disabled) AS disabled`;
    if (rows[0]?.disabled) this.options.logger.warn({ webhook_id: rows[0].disabled }, 'webhook endpoint disabled: deliveries failed for WEBHOOK_RETRY_HOURS');
  }
}
