// Notices over Redis pub/sub: published on the shared command connection
// (src/limits/redis.ts: fails fast while Redis is away), heard on one
// connection of their own, subscribed to every channel (a subscribed
// connection can send nothing else).
import type { Redis } from 'ioredis';
import type { NoticeTransport } from './carrier.js';

export interface RedisNoticeOptions {
  url: string;
  /** The shared command connection. */
  publisher: Redis;
  /** REDIS_KEY_PREFIX: deployments sharing a Redis hear only their own notices. */
  prefix: string;
}

/** The listening connection's name (CLIENT LIST), so an operator can tell it from the command connection. */
export const redisListenerName = (prefix: string) => `${prefix}:notices`;

export function redisTransport({ url, publisher, prefix }: RedisNoticeOptions): NoticeTransport {
  const wire = (channel: string) => `${prefix}:${channel}`;
  let subscriber: Redis | undefined;
  return {
    kind: 'redis',
    async listen(channels, deliver, onMissed) {
      // Imported here: a server without REDIS_URL never loads ioredis.
      const { Redis } = await import('ioredis');
      const byWire = new Map(channels.map((channel) => [wire(channel), channel]));
      // It waits for Redis as long as it takes; ioredis subscribes again
      // after every reconnection (autoResubscribe). Outages are logged by the
      // command connection (connectRedis), not again here.
      const listener = new Redis(url, {
        connectionName: redisListenerName(prefix),
        connectTimeout: 1000,
        maxRetriesPerRequest: null,
        retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
      });
      subscriber = listener;
      let lost = false;
      listener.on('error', () => {});
      listener.on('close', () => (lost = true));
      listener.on('ready', () => {
        if (lost) onMissed();
        lost = false;
      });
      listener.on('message', (from: string, message: string) => {
        const channel = byWire.get(from);
        if (channel) deliver(channel, message);
      });
      if (byWire.size) void listener.subscribe(...byWire.keys()).catch(() => {});
    },
    publish: (channel, message) => publisher.publish(wire(channel), message),
    close: async () => subscriber?.disconnect(),
  };
}
