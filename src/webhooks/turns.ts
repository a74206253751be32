// Which due messages the relay sends next (issue 50): accounts take turns,
// and within an account its webhooks do. The relay's slots are shared by
// every tenant, so the message sent next is not the oldest on the instance
// but the oldest of the account with the fewest sends in flight, and within
// it of the webhook with the fewest; an account never holds more than its
// share of the slots, a webhook never more than its cap. lookSql reads the
// candidates (one statement per look), takeTurns picks among them.
import { Prisma } from '../generated/prisma/client.js';

/** Due messages read per look (at most perEndpoint of each webhook, accountConcurrency of each account). */
const CANDIDATES = 100;

/**
 * The relay's look (issue 50): the webhooks with pending messages, found by
 * skipping through the partial index of pending messages (one probe per
 * webhook, however many messages each holds; the ORDER BY names that index's
 * columns, so no index holding the delivered ones is walked instead); each one's oldest few due
 * messages unless it rests or is full here; then per account the first of
 * each webhook before any second, and every account's first turn before any
 * account's second. bench/relay-look.ts measures it.
 */
export function lookSql(
  now: Date,
  { perEndpoint, accountConcurrency, endpointTimeouts }: { perEndpoint: number; accountConcurrency: number; endpointTimeouts: number },
  fullAccounts: readonly number[],
  fullEndpoints: readonly string[],
): Prisma.Sql {
  // A sentinel keeps each NOT IN list non-empty.
  return Prisma.sql`
    WITH RECURSIVE pending AS (
      (SELECT endpoint_id FROM webhook_messages WHERE next_attempt_at IS NOT NULL ORDER BY endpoint_id, next_attempt_at LIMIT 1)
      UNION ALL
      SELECT (
        SELECT m.endpoint_id FROM webhook_messages m WHERE m.next_attempt_at IS NOT NULL AND m.endpoint_id > p.endpoint_id
        ORDER BY m.endpoint_id, m.next_attempt_at LIMIT 1
      )
      FROM pending p WHERE p.endpoint_id IS NOT NULL
    ), due AS (
      SELECT m.id, e.id AS endpoint_id, e.account_id, e.consecutive_timeouts >= ${endpointTimeouts} AS probing, m.next_attempt_at,
        row_number() OVER (PARTITION BY e.id ORDER BY m.next_attempt_at, m.id) AS nth
      FROM pending p
      JOIN webhook_endpoints e ON e.id = p.endpoint_id AND e.disabled_at IS NULL AND (e.paused_until IS NULL OR e.paused_until <= ${now}::timestamp(3))
        AND e.account_id NOT IN (${Prisma.join([-1, ...fullAccounts])}) AND e.id NOT IN (${Prisma.join(['', ...fullEndpoints])})
      CROSS JOIN LATERAL (
        SELECT id, next_attempt_at FROM webhook_messages
        WHERE endpoint_id = e.id AND next_attempt_at <= ${now}::timestamp(3)
        ORDER BY next_attempt_at LIMIT ${perEndpoint}
      ) m
    ), turns AS (
      SELECT due.*, row_number() OVER (PARTITION BY account_id ORDER BY nth, next_attempt_at, id) AS turn FROM due
    )
    SELECT id, endpoint_id, account_id, probing FROM turns WHERE turn <= ${accountConcurrency}
    ORDER BY turn, next_attempt_at, id LIMIT ${CANDIDATES}`;
}

/** A due message as the relay's look reads it, oldest first within each webhook. */
export interface Candidate {
  id: string;
  endpointId: string;
  accountId: number;
  /** Its webhook timed out WEBHOOK_ENDPOINT_TIMEOUTS times in a row: one send at a time until it answers. */
  probing: boolean;
}

export interface TurnLimits {
  /** Slots free on this instance now. */
  free: number;
  /** Sends one account may have in flight on this instance. */
  perAccount: number;
  /** Sends one webhook may have in flight on this instance (1 while probing). */
  perEndpoint: number;
}

/** Sends in flight on this instance, by account and by webhook. */
export interface InFlight {
  accounts: ReadonlyMap<number, number>;
  endpoints: ReadonlyMap<string, number>;
}

/**
 * The candidates to send now, in the order chosen: repeatedly the account
 * with the fewest sends (in flight plus chosen), then its webhook with the
 * fewest, then that webhook's oldest; ties go to the candidate that came
 * first (`candidates` is ordered oldest first). At most `free` of them.
 */
export function takeTurns(candidates: readonly Candidate[], inFlight: InFlight, limits: TurnLimits): Candidate[] {
  const accountLoad = new Map<number, number>();
  const endpointLoad = new Map<string, number>();
  const loadOf = <K>(own: Map<K, number>, base: ReadonlyMap<K, number>, key: K) => own.get(key) ?? base.get(key) ?? 0;
  const capOf = (c: Candidate) => (c.probing ? 1 : limits.perEndpoint);
  const left = candidates.map((c, order) => ({ c, order }));
  const chosen: Candidate[] = [];
  while (chosen.length < limits.free) {
    let best: { c: Candidate; order: number; index: number; account: number; endpoint: number } | undefined;
    for (let index = 0; index < left.length; index++) {
      const { c, order } = left[index]!;
      const account = loadOf(accountLoad, inFlight.accounts, c.accountId);
      const endpoint = loadOf(endpointLoad, inFlight.endpoints, c.endpointId);
      if (account >= limits.perAccount || endpoint >= capOf(c)) continue;
      if (!best || account < best.account || (account === best.account && (endpoint < best.endpoint || (endpoint === best.endpoint && order < best.order)))) {
        best = { c, order, index, account, endpoint };
      }
    }
    if (!best) break;
    chosen.push(best.c);
    left.splice(best.index, 1);
    accountLoad.set(best.c.accountId, best.account + 1);
    endpointLoad.set(best.c.endpointId, best.endpoint + 1);
  }
  return chosen;
}
