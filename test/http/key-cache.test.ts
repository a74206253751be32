import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { freshPrefix, redisUrl } from '../helpers/redis.js';
import { startTwoInstances, type TestServer } from '../helpers/server.js';

const stats = (t: TestServer, key: string) => call(t.url('/api/v1/stats'), { key });

/** Milliseconds until `t` answers `key` with `status`, asking every 5 ms; gives up after `limitMs`. */
async function msUntil(t: TestServer, key: string, status: number, limitMs = 3000): Promise<number> {
  const started = Date.now();
  for (;;) {
    const res = await stats(t, key);
    const elapsed = Date.now() - started;
    if (res.status === status) return elapsed;
    if (elapsed > limitMs) throw new Error(`still ${res.status} after ${elapsed} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A few requests on `t`, so its cache holds the key (and its plan). */
async function warm(t: TestServer, key: string) {
  for (let i = 0; i < 3; i++) expect((await stats(t, key)).status).to.equal(200);
}

if (redisUrl && backends.includes('postgresql')) {
  describe('cached API keys across two instances (PostgreSQL + Redis)', () => {
    let a: TestServer;
    let b: TestServer;
    let close: () => Promise<void>;
    before(async () => {
      ({ a, b, close } = await startTwoInstances({ REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: freshPrefix() }));
    });
    after(() => close());

    it('when a key is rotated on instance A, then instance B refuses the old key within 100 ms and takes the new one', async () => {
      const { accountId, apiKey } = await a.account();
      await warm(b, apiKey);
      const rotated = await a.admin('POST', `/admin/accounts/${accountId}/keys`);
      expect(await msUntil(b, apiKey, 401)).to.be.below(100);
      expect((await stats(b, rotated.api_key)).status).to.equal(200);
    });

    it('when a plan loses API access on instance A, then instance B answers 403 within 100 ms', async () => {
      await a.plan('switchable', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 10, daily_uploads: 1 });
      const { apiKey } = await a.account('switchable');
      await warm(b, apiKey);
      await a.plan('switchable', { api_access: false });
      expect(await msUntil(b, apiKey, 403)).to.be.below(100);
    });

    it('when a plan lowers its per-minute limit on instance A, then instance B holds the account to it within 100 ms', async () => {
      await a.plan('lowered', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 10, daily_uploads: 1 });
      const { apiKey } = await a.account('lowered');
      await warm(b, apiKey);
      await a.plan('lowered', { requests_per_minute: 3 });
      expect(await msUntil(b, apiKey, 429)).to.be.below(100);
      expect((await stats(b, apiKey)).headers.get('ratelimit-policy')).to.match(/^"minute";q=3;/);
    });

    it("when an account's plan is changed on instance A, then instance B sees the new plan within 100 ms", async () => {
      const { accountId, apiKey } = await a.account('pro');
      await warm(b, apiKey);
      await a.admin('PATCH', `/admin/accounts/${accountId}`, { plan: 'free' });
      expect(await msUntil(b, apiKey, 403)).to.be.below(100);
    });
  });

  describe('cached API keys when change notices are lost', () => {
    let a: TestServer;
    let b: TestServer;
    let close: () => Promise<void>;
    before(async () => {
      // Different key prefixes: the instances share the database but not the channel, as if pub/sub were down.
      ({ a, b, close } = await startTwoInstances({ REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: freshPrefix() }, { REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: freshPrefix() }));
    });
    after(() => close());

    it('when instance B never hears of a rotation, then it refuses the old key once its cache entry expires (within about a second)', async () => {
      const { accountId, apiKey } = await a.account();
      await warm(b, apiKey);
      const started = Date.now();
      await a.admin('POST', `/admin/accounts/${accountId}/keys`);
      await msUntil(b, apiKey, 401);
      expect(Date.now() - started).to.be.below(1300);
    });
  });
}
