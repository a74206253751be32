import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';

/**
 * The Redis connection the limiters share. Commands fail fast instead of
 * queueing (enableOfflineQueue: false, a short command timeout), so an
 * outage or a slow Redis costs a request milliseconds, not seconds: the
 * limiters then fall back to their in-memory insurance. ioredis keeps
 * reconnecting in the background; the outage is logged once each way.
 *
 * Commands issued in the same tick go out in one write (auto-pipelining):
 * a request's minute and day counters are one round trip, and under load
 * the commands of concurrent requests share writes too.
 */
export async function connectRedis(url: string, logger: Logger): Promise<Redis> {
  // Imported here: a server without REDIS_URL never loads ioredis.
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    enableAutoPipelining: true,
    commandTimeout: 250,
    connectTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
  });
  let down = false;
  redis.on('error', (err: Error) => {
    if (down) return;
    down = true;
    logger.warn({ err: err.message }, 'redis unreachable: rate limits are enforced per instance until it returns');
  });
  redis.on('ready', () => {
    if (!down) return;
    down = false;
    logger.info('redis reachable again: rate limits are shared again');
  });
  return redis;
}

/** Whether Redis answers now; for readiness. */
export const redisReady = (redis: Redis) => redis.status === 'ready';

/**
 * Where the rate limits are counted, for the listening line: a wrong
 * REDIS_URL (a port off by one) leaves a server that works, with limits per
 * instance, and one warning an operator scrolls past. A first connection
 * still under way gets up to its connect timeout to tell; a refused one
 * (ECONNREFUSED comes at once) is not waited for.
 */
export async function rateLimitsAtStart(url: string | undefined, redis: Redis | undefined): Promise<string> {
  if (!url || !redis) return 'per instance (no REDIS_URL)';
  if (['wait', 'connecting', 'connect'].includes(redis.status)) {
    const settled = new AbortController();
    const { signal } = settled;
    await Promise.race([once(redis, 'ready', { signal }), once(redis, 'error', { signal }), sleep(1000, undefined, { signal })]).catch(() => {});
    settled.abort();
  }
  if (redisReady(redis)) return 'shared through Redis';
  const { hostname, port } = new URL(url);
  return `per instance until Redis at ${hostname}:${port || 6379} answers (check REDIS_URL)`;
}
