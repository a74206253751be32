// A webhook whose receiver does not answer rests (issue 50): each send to it
// holds one of the relay's slots until the send's timeout, so a receiver
// that never answers would hold as many as it is given. After
// endpointTimeouts sends in a row got no answer within the timeout, nothing
// is sent to it before paused_until (the send's timeout, doubled with each
// further one, up to WEBHOOK_MAX_BACKOFF); after that one message at a time
// (the look's probing) until any answer, whatever its status, ends the run.
// Refused connections and refused addresses neither add to the run nor end
// it: they cost no slot time. The state is the webhook's row, so every
// instance sees it. Each statement here runs after the message's settle, on
// its own: holding the message's row and the webhook's in one statement
// would deadlock against giveUp, which holds the webhook's row and then
// stops its other messages. The common send (answered, no run to end) runs
// none of them.
import { Prisma } from '../generated/prisma/client.js';

export interface RestPolicy {
  /** Sends in a row that time out before the webhook rests. */
  endpointTimeouts: number;
  /** The send's timeout: the first rest. */
  timeoutMs: number;
  /** WEBHOOK_MAX_BACKOFF: the longest rest. */
  maxBackoffMs: number;
}

/** Ends the webhook's run of timeouts and its rest (for an answer to a send claimed while the run was on). */
export const answeredSql = (endpointId: string): Prisma.Sql => Prisma.sql`
  UPDATE webhook_endpoints SET consecutive_timeouts = 0, paused_until = NULL
  WHERE id = ${endpointId} AND (consecutive_timeouts > 0 OR paused_until IS NOT NULL)`;

/** Adds a timeout to the webhook's run, and from endpointTimeouts on sets its rest (never shortening one already set). */
export const timedOutSql = (endpointId: string, now: Date, { endpointTimeouts, timeoutMs, maxBackoffMs }: RestPolicy): Prisma.Sql => Prisma.sql`
  UPDATE webhook_endpoints SET consecutive_timeouts = consecutive_timeouts + 1,
    paused_until = CASE WHEN consecutive_timeouts + 1 < ${endpointTimeouts} THEN paused_until ELSE greatest(paused_until,
      ${now}::timestamp(3) + least(${maxBackoffMs}::float8, ${timeoutMs}::float8 * power(2, least(consecutive_timeouts + 1 - ${endpointTimeouts}, 30))) * interval '1 millisecond')
    END
  WHERE id = ${endpointId}`;
