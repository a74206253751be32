// The three rate-limiter-flexible classes we use, each from its own file.
// The package's index requires every limiter it has (MongoDB, MySQL,
// DynamoDB, Prisma, Drizzle, etcd, Valkey, SQLite...: 36 modules, 0.4 MiB of
// V8 heap held for the life of the process; issue 54's idle memory). Types
// come from the package's own declarations; the files are the same ones its
// index loads, so `instanceof RateLimiterRes` holds for what the limiters throw.
import { createRequire } from 'node:module';
import type * as Flexible from 'rate-limiter-flexible';

const require = createRequire(import.meta.url);

export const RateLimiterRedis = require('rate-limiter-flexible/lib/RateLimiterRedis.js') as typeof Flexible.RateLimiterRedis;
export const RateLimiterMemory = require('rate-limiter-flexible/lib/RateLimiterMemory.js') as typeof Flexible.RateLimiterMemory;
export const RateLimiterRes = require('rate-limiter-flexible/lib/RateLimiterRes.js') as typeof Flexible.RateLimiterRes;
export type RateLimiterRes = Flexible.RateLimiterRes;
export type RateLimiterAbstract = Flexible.RateLimiterAbstract;
export type RateLimiterRedis = Flexible.RateLimiterRedis;
export type RateLimiterMemory = Flexible.RateLimiterMemory;
