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
//
// Tenants share the relay (issue 50): accounts take turns for its slots
// (turns.ts), one account holds at most accountConcurrency of them, and a
// webhook whose sends time out endpointTimeouts times in a row rests (nothing
// is sent to it before paused_until, doubling with each further timeout),
// then gets one send at a time until it answers (rests.ts).
import type { Logger } from 'pino';
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import { createAgents, send, type Agents, type SendResult } from './send.js';
import { signatureHeader } from './signature.js';
import { answeredSql, timedOutSql } from './rests.js';
import { lookSql, takeTurns, type Candidate } from './turns.js';

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
  /** WEBHOOK_ACCOUNT_CONCURRENCY: sends in flight on this instance for one account (half of concurrency). */
  accountConcurrency?: number;
  /** Sends in a row that time out before the webhook rests (3). */
  endpointTimeouts?: number;
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
  endpointTimeouts: 3,
  onOutcome: () => {},
  keepMs: 30 * 86_400_000,
  pruneEveryMs: 3_600_000,
};

/** How long past the send's deadline a claim holds (the settle's own round trip, a slow database). */
const LEASE_MARGIN_MS = 30_000;

interface Claimed {
  id: string;
  endpoint_id: string;
  account_id: number;
  /** The webhook's run of timeouts when the message was claimed. */
  consecutive_timeouts: number;
  body: string;
  attempts: number;
  created_at: Date;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: Date | null;
}

/** Adds `by` to `key`'s count, forgetting it at 0. */
function count<K>(counts: Map<K, number>, key: K, by: number): void {
  const n = (counts.get(key) ?? 0) + by;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
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
  private readonly perAccount = new Map<number, number>();
  private readonly sends = new Set<Promise<void>>();
  private readonly stopping = new AbortController();
  private inFlight = 0;
  private timer?: NodeJS.Timeout;
  private pruner?: NodeJS.Timeout;
  private looking?: Promise<void>;
  private again = false;

  constructor(options: RelayOptions) {
    const concurrency = options.concurrency ?? RELAY_DEFAULTS.concurrency;
    this.options = { ...RELAY_DEFAULTS, accountConcurrency: Math.ceil(concurrency / 2), ...options };
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
    const { prisma, concurrency, perEndpoint, accountConcurrency, endpointTimeouts } = this.options;
    const free = concurrency - this.inFlight;
    if (free <= 0) return;
    const now = new Date();
    // Accounts and webhooks at their cap here are left out, so their backlog
    // does not fill the candidates.
    const fullAccounts = [...this.perAccount].filter(([, n]) => n >= accountConcurrency).map(([id]) => id);
    const fullEndpoints = [...this.perEndpoint].filter(([, n]) => n >= perEndpoint).map(([id]) => id);
    const rows = await prisma.$queryRaw<{ id: string; endpoint_id: string; account_id: number; probing: boolean }[]>(
      lookSql(now, { perEndpoint, accountConcurrency, endpointTimeouts }, fullAccounts, fullEndpoints),
    );
    const candidates: Candidate[] = rows.map((r) => ({ id: r.id, endpointId: r.endpoint_id, accountId: r.account_id, probing: r.probing }));
    const chosen = takeTurns(candidates, { accounts: this.perAccount, endpoints: this.perEndpoint }, { free, perAccount: accountConcurrency, perEndpoint });
    if (chosen.length === 0 || this.stopping.signal.aborted) return;
    const leaseUntil = new Date(now.getTime() + this.options.timeoutMs + LEASE_MARGIN_MS);
    // Rows another instance claimed since (locked, or no longer due) are skipped.
    const claimed = await prisma.$queryRaw<Claimed[]>`
      WITH claimed AS (
        UPDATE webhook_messages SET next_attempt_at = ${leaseUntil}::timestamp(3), attempts = attempts + 1
        WHERE id IN (
          SELECT id FROM webhook_messages WHERE id IN (${Prisma.join(chosen.map((c) => c.id))}) AND next_attempt_at <= ${now}::timestamp(3)
          FOR UPDATE SKIP LOCKED
        )
        RETURNING id, endpoint_id, body, attempts, created_at
      )
      SELECT c.*, e.account_id, e.consecutive_timeouts, e.url, e.secret, e.previous_secret, e.previous_secret_until
      FROM claimed c JOIN webhook_endpoints e ON e.id = c.endpoint_id`;
    for (const message of claimed) this.startSend(message);
  }

  private startSend(message: Claimed): void {
    this.inFlight++;
    count(this.perEndpoint, message.endpoint_id, +1);
    count(this.perAccount, message.account_id, +1);
    const sending = this.deliver(message)
      .catch((err: unknown) => this.options.logger.warn({ err, message_id: message.id }, 'webhook relay: settling a delivery failed'))
      .finally(() => {
        this.sends.delete(sending);
        this.inFlight--;
        count(this.perEndpoint, message.endpoint_id, -1);
        count(this.perAccount, message.account_id, -1);
        // A slot is free: the next due message need not wait for the poll.
        this.wake();
      });
    this.sends.add(sending);
  }

  private async deliver(message: Claimed): Promise<void> {
    const { prisma, timeoutMs } = this.options;
    const timestamp = Math.floor(Date.now() / 1000);
    const secrets = [message.secret];
    if (message.previous_secret && message.previous_secret_until && message.previous_secret_until.getTime() > Date.now()) secrets.push(message.previous_secret);
    const headers = {
      'webhook-id': message.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signatureHeader(secrets, message.id, timestamp, message.body),
    };
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = AbortSignal.any([deadline, this.stopping.signal]);
    const result = await send(this.agents, message.url, headers, message.body, signal);
    const now = new Date();
    // The webhook's run of timeouts (rests.ts), after the message is settled:
    // any answer ends it, a timeout adds to it (and may rest the webhook),
    // anything else (refused, a bad address) leaves it.
    const run =
      result.status !== undefined
        ? message.consecutive_timeouts > 0 && answeredSql(message.endpoint_id)
        : deadline.aborted && !this.stopping.signal.aborted && timedOutSql(message.endpoint_id, now, this.options);
    await this.settle(message, result, now);
    if (run) await prisma.$executeRaw(run);
  }

  /** Records how the try ended: delivered, tried again later, handed back (a shutdown), or given up. */
  private async settle(message: Claimed, result: SendResult, now: Date): Promise<void> {
    const { prisma, logger } = this.options;
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
