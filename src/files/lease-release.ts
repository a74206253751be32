// How a release request (src/tus/locker.ts) reaches the instance holding an
// upload's lease: Redis pub/sub when Redis is configured, PostgreSQL
// LISTEN/NOTIFY when only PostgreSQL is shared, nothing on the embedded
// database (one instance: the request is handed over in-process). Only a
// contended request sends one; the uncontended path costs nothing here.
// The same carrier, on a channel of its own, tells the instances that a
// link was revoked or a file deleted (live-downloads.ts).
import type { Redis } from 'ioredis';
import type { Client } from 'pg';
import type { Logger } from 'pino';
import { subscribeRedis } from '../limits/redis.js';

export interface ReleaseCarrier {
  publish(id: string): Promise<unknown>;
  close(): Promise<void>;
}

/** Over Redis pub/sub: `publisher` is the shared command connection; one more connection listens. */
export async function redisCarrier(url: string, publisher: Redis, channel: string, onRequest: (id: string) => void): Promise<ReleaseCarrier> {
  // Missed requests while disconnected need no catching up: the newcomer
  // waits, then gets 409, and the lease still runs out by itself.
  const subscriber = await subscribeRedis(url, channel, onRequest, () => {});
  return {
    publish: (id) => publisher.publish(channel, id),
    close: async () => subscriber.disconnect(),
  };
}

const PG_CHANNEL = 'dropstream_upload_release';

/** Over PostgreSQL LISTEN/NOTIFY: one connection of its own listens; NOTIFY goes over it too. */
export async function postgresCarrier(
  url: string,
  logger: Logger,
  onRequest: (id: string) => void,
  /** Another notice on the same carrier (live-downloads.ts: ended links), on a channel of its own. */
  { channel = PG_CHANNEL, name = 'upload release' }: { channel?: string; name?: string } = {},
): Promise<ReleaseCarrier> {
  // Imported here: the embedded database needs no pg.
  const { default: pg } = await import('pg');
  let client: Client | undefined;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  let failing = false;
  // Every failure (a lost connection, a failed connect or LISTEN) schedules
  // the next try, so a PostgreSQL restart of any length is followed.
  const retryLater = () => {
    if (!closed) retry = setTimeout(() => void connect(), 1000).unref();
  };
  const connect = async (): Promise<void> => {
    const next = new pg.Client({ connectionString: url });
    next.on('notification', (n) => n.channel === channel && n.payload && onRequest(n.payload));
    next.on('error', (err) => {
      if (client !== next) return; // a connect that fails is handled below
      logger.warn({ err: err.message }, `${name} listener lost its PostgreSQL connection; reconnecting`);
      client = undefined;
      next.end().catch(() => {});
      retryLater();
    });
    try {
      await next.connect();
      await next.query(`LISTEN ${channel}`);
      if (closed) return void (await next.end().catch(() => {}));
      client = next;
      if (failing) logger.info(`${name} listener connected to PostgreSQL again`);
      failing = false;
    } catch (err) {
      // One line per outage, not one a second.
      if (!failing) logger.warn({ err: (err as Error).message }, `${name} listener could not connect to PostgreSQL; retrying every second`);
      failing = true;
      next.end().catch(() => {});
      retryLater();
    }
  };
  await connect();
  return {
    publish: async (id) => {
      if (!client) throw new Error(`${name} listener not connected`);
      return client.query('SELECT pg_notify($1, $2)', [channel, id]);
    },
    close: async () => {
      closed = true;
      clearTimeout(retry);
      await client?.end().catch(() => {});
    },
  };
}
