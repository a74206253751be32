import { Redis } from 'ioredis';
import type { Logger } from 'pino';

/**
 * The Redis connection the limiters share. Commands fail fast instead of
 * queueing (enableOfflineQueue: false, a short command timeout), so an
 * outage or a slow Redis costs a request milliseconds, not seconds: the
 * limiters then fall back to their in-memory insurance. ioredis keeps
 * reconnecting in the background; the outage is logged once each way.
 */
export function connectRedis(url: string, logger: Logger): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
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
