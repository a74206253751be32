// Per-client-address limits on file request links (/r/...), where nobody
// signs in: one outsider must not fill a request, or its owner's daily
// uploads, in a burst. Requests per minute and uploads started per hour, on
// rate-limiter-flexible like the failure limits (Redis shared by every
// instance, an in-memory insurance limiter while Redis is away).
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from './rate-limiter-classes.js';

export interface RequestLinkLimitsOptions {
  redis?: Redis;
  keyPrefix?: string;
  /** Requests per address and minute to any /r/ route (REQUEST_LINK_REQUESTS_PER_MINUTE). */
  requestsPerMinute: number;
  /** Uploads (plain, or tus creations) per address and hour (REQUEST_LINK_UPLOADS_PER_HOUR). */
  uploadsPerHour: number;
}

function limiter(options: RequestLinkLimitsOptions, name: string, points: number, duration: number): RateLimiterAbstract {
  const base = { keyPrefix: `${options.keyPrefix ?? 'dropstream'}:rlink:${name}`, points, duration };
  const memory = new RateLimiterMemory(base);
  return options.redis ? new RateLimiterRedis({ ...base, storeClient: options.redis, rejectIfRedisNotReady: true, insuranceLimiter: memory }) : memory;
}

export class RequestLinkLimits {
  private readonly requests: RateLimiterAbstract;
  private readonly uploads: RateLimiterAbstract;

  constructor(readonly options: RequestLinkLimitsOptions) {
    this.requests = limiter(options, 'req', options.requestsPerMinute, 60);
    this.uploads = limiter(options, 'up', options.uploadsPerHour, 3600);
  }

  /** Counts a request from `address`: seconds to wait when it is over the limit, else 0. */
  request(address: string): Promise<number> {
    return take(this.requests, address);
  }

  /** Counts an upload started by `address`: seconds to wait when it is over the limit, else 0. */
  upload(address: string): Promise<number> {
    return take(this.uploads, address);
  }
}

async function take(limiter: RateLimiterAbstract, key: string): Promise<number> {
  try {
    await limiter.consume(key);
    return 0;
  } catch (res) {
    // Over the limit the library rejects with its result, not an Error.
    if (res instanceof RateLimiterRes) return Math.max(1, Math.ceil(res.msBeforeNext / 1000));
    throw res;
  }
}
