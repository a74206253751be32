// One listening connection per instance for every notice between instances
// (src/notices): tus release requests, ended links and caller changes used
// to open one each, so an instance held three Redis subscriber connections,
// or two PostgreSQL LISTEN connections (caller changes had none there).
import { expect } from 'chai';
import { Redis } from 'ioredis';
import pg from 'pg';
import { POSTGRES_LISTENER_NAME } from '../../src/notices/postgres.js';
import { redisListenerName } from '../../src/notices/redis.js';
import { buildTestServer, type BuiltTestServer } from '../helpers/built-server.js';
import { backends, createTestDatabase } from '../helpers/databases.js';
import { eventually } from '../helpers/raw-upload.js';
import { freshPrefix, redisUrl } from '../helpers/redis.js';

/** Connections to `database` with the notice listener's application_name. */
async function postgresListeners(url: string): Promise<number> {
  const database = new URL(url).pathname.slice(1);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = $2', [database, POSTGRES_LISTENER_NAME]);
    return rows[0].n as number;
  } finally {
    await client.end();
  }
}

/** CLIENT LIST's pub/sub connections named for `prefix`'s notices, with their fields. */
async function redisListeners(prefix: string): Promise<Record<string, string>[]> {
  const redis = new Redis(redisUrl!, { lazyConnect: true });
  await redis.connect();
  try {
    const list = (await redis.call('CLIENT', 'LIST', 'TYPE', 'pubsub')) as string;
    return list
      .split('\n')
      .filter(Boolean)
      .map((line) => Object.fromEntries(line.split(' ').map((field) => field.split('=', 2) as [string, string])))
      .filter((client) => client.name === redisListenerName(prefix));
  } finally {
    redis.disconnect();
  }
}

if (backends.includes('postgresql')) {
  describe('one notice listener per instance', function () {
    this.timeout(30_000);
    let server: BuiltTestServer | undefined;
    let drop: (() => Promise<void>) | undefined;
    afterEach(async () => {
      await server?.close();
      await drop?.();
      server = drop = undefined;
    });

    async function build(env: Record<string, string>) {
      const db = await createTestDatabase();
      drop = db.drop;
      server = await buildTestServer('postgresql', { ...env, DATABASE_URL: db.url });
      return db.url;
    }

    it('when only PostgreSQL is shared, then an instance holds one LISTEN connection for every notice', async () => {
      const url = await build({});
      expect(await postgresListeners(url)).to.equal(1);
    });

    if (redisUrl) {
      it('when Redis is configured, then an instance holds one Redis subscriber connection, subscribed to the four channels (tus releases, ended links, key changes, closed file requests), and no LISTEN connection', async () => {
        const prefix = freshPrefix();
        const url = await build({ REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: prefix });
        // The subscriber connects in the background (a Redis away at start must not hold the start up): wait for four subscriptions.
        const subscriptions = (clients: Record<string, string>[]) => clients.reduce((sum, client) => sum + Number(client.sub), 0);
        const listeners = await eventually(() => redisListeners(prefix), (clients) => subscriptions(clients) >= 4);
        expect(listeners.map((client) => client.sub)).to.deep.equal(['4']);
        expect(await postgresListeners(url)).to.equal(0);
      });
    }
  });
}
