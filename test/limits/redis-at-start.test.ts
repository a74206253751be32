// What the listening line says about where rate limits are counted: a wrong
// REDIS_URL leaves a working server with limits per instance, which one
// warning among the start's lines was easy to miss (issue 37, item 11).
import { expect } from 'chai';
import { captureLog } from '../helpers/log-capture.js';
import { freePort } from '../helpers/ports.js';
import { freshPrefix, redisUrl } from '../helpers/redis.js';
import { startTestServer } from '../helpers/server.js';

async function listeningLine(env: Record<string, string>) {
  const log = captureLog('info');
  const t = await startTestServer('pglite', env, log.logger);
  await t.close();
  const line = log.lines.find((l) => l.msg === 'dropstream listening');
  expect(line, 'the listening line').to.not.equal(undefined);
  return line!;
}

describe('rate limits in the listening line', () => {
  it('when REDIS_URL names a port nothing listens on, then the listening line says limits are per instance until Redis there answers', async () => {
    const port = await freePort();
    const line = await listeningLine({ REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_KEY_PREFIX: freshPrefix() });
    expect(line.rateLimits).to.equal(`per instance until Redis at 127.0.0.1:${port} answers (check REDIS_URL)`);
  });

  it('when REDIS_URL is unset, then per instance', async () => {
    expect((await listeningLine({})).rateLimits).to.equal('per instance (no REDIS_URL)');
  });

  // Without TEST_REDIS_URL, helpers/redis.ts names the Redis half in the "Did not run" summary.
  if (redisUrl) {
    const url = redisUrl;
    it('when Redis answers, then shared', async () => {
      expect((await listeningLine({ REDIS_URL: url, REDIS_KEY_PREFIX: freshPrefix() })).rateLimits).to.equal('shared through Redis');
    });
  }
});
