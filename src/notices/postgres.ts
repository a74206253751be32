// Notices over PostgreSQL LISTEN/NOTIFY, when PostgreSQL is shared and Redis
// is not: one connection of its own listens on every channel, and NOTIFY
// goes over it too (the Prisma pool's connections come and go).
import type { Client } from 'pg';
import type { Logger } from 'pino';
import type { NoticeTransport } from './carrier.js';

/** The listening connection's application_name (pg_stat_activity). */
export const POSTGRES_LISTENER_NAME = 'dropstream notices';

/** Between tries while PostgreSQL is away. */
const RETRY_MS = 1000;
/** A connect, LISTEN or NOTIFY that takes longer has failed. */
const QUERY_MS = 5000;

/** `upload-release` -> `dropstream_upload_release` (an identifier: no quoting needed). */
const wire = (channel: string) => `dropstream_${channel.replaceAll('-', '_')}`;

export function postgresTransport(url: string, logger: Logger): NoticeTransport {
  let client: Client | undefined;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  return {
    kind: 'postgresql',
    async listen(channels, deliver, onMissed) {
      // Imported here: the embedded database needs no pg.
      const { default: pg } = await import('pg');
      const byWire = new Map(channels.map((channel) => [wire(channel), channel]));
      let failing = false;
      let connectedOnce = false;
      // Every failure (a lost connection, a failed connect or LISTEN) schedules
      // the next try, so a PostgreSQL restart of any length is followed.
      const retryLater = () => {
        if (!closed) retry = setTimeout(() => void connect(), RETRY_MS).unref();
      };
      const connect = async (): Promise<void> => {
        const next = new pg.Client({ connectionString: url, application_name: POSTGRES_LISTENER_NAME, connectionTimeoutMillis: QUERY_MS, query_timeout: QUERY_MS });
        next.on('notification', (n) => {
          const channel = byWire.get(n.channel);
          if (channel && n.payload) deliver(channel, n.payload);
        });
        next.on('error', (err) => {
          if (client !== next) return; // a connect that fails is handled below
          logger.warn({ err: err.message }, 'notice listener lost its PostgreSQL connection; reconnecting');
          client = undefined;
          next.end().catch(() => {});
          retryLater();
        });
        try {
          await next.connect();
          if (byWire.size) await next.query([...byWire.keys()].map((name) => `LISTEN ${name}`).join('; '));
          if (closed) return void (await next.end().catch(() => {}));
          client = next;
          if (failing) logger.info('notice listener connected to PostgreSQL again');
          if (connectedOnce) onMissed();
          connectedOnce = true;
          failing = false;
        } catch (err) {
          // One line per outage, not one a second.
          if (!failing) logger.warn({ err: (err as Error).message }, 'notice listener could not connect to PostgreSQL; retrying every second');
          failing = true;
          next.end().catch(() => {});
          retryLater();
        }
      };
      await connect();
    },
    publish: async (channel, message) => {
      if (!client) throw new Error('notice listener not connected to PostgreSQL');
      return client.query('SELECT pg_notify($1, $2)', [wire(channel), message]);
    },
    close: async () => {
      closed = true;
      clearTimeout(retry);
      await client?.end().catch(() => {});
    },
  };
}
