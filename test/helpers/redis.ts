// The Redis the limit suites share counters through. CI always sets
// TEST_REDIS_URL; without it the Redis half reports that it did not run.
import { randomBytes } from 'node:crypto';
import { notRun } from './not-run.js';

export const redisUrl = process.env.TEST_REDIS_URL;

if (!redisUrl) {
  if (process.env.CI) throw new Error('CI must set TEST_REDIS_URL: the Redis half of the limit suite has to run there');
  notRun('TEST_REDIS_URL is not set: the Redis half of the rate-limit suite', 'TEST_REDIS_URL=redis://127.0.0.1:6379 npm test (see docs/development.md)');
}

/** A key prefix of its own, so test runs never share counters. */
export const freshPrefix = () => `dropstream-test-${randomBytes(6).toString('hex')}`;
