// Which transport an instance's notices take: Redis when configured (every
// instance has it), else PostgreSQL when the database is a server (shared by
// the instances), else this process alone (the embedded database: one
// instance).
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { inProcessTransport, NoticeCarrier } from './carrier.js';
import { postgresTransport } from './postgres.js';
import { redisTransport } from './redis.js';

export interface NoticeSettings {
  redis?: { url: string; publisher: Redis; prefix: string };
  databaseUrl?: string;
  logger: Logger;
}

export function openNotices({ redis, databaseUrl, logger }: NoticeSettings): NoticeCarrier {
  if (redis) return new NoticeCarrier(redisTransport(redis));
  if (databaseUrl) return new NoticeCarrier(postgresTransport(databaseUrl, logger));
  return new NoticeCarrier(inProcessTransport());
}
