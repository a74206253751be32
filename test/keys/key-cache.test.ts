import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { freshPrefix, redisUrl } from '../helpers/redis.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestServer, startTwoInstances, type TestServer } from '../helpers/server.js';
import { backends, createTestDatabase } from '../helpers/databases.js';
import { testClock } from '../helpers/clock.js';

const stats = (t: TestServer, key: string) => call(t.url('/api/v1/stats'), { key });

/** Until `t` answers `key` with `status` (or five seconds passed): the status it answered last. */
const statusBecomes = async (t: TestServer, key: string, status: number) => eventually(async () => (await stats(t, key)).status, (s) => s === status);

/** A few requests on `t`, so its cache holds the key (and its plan). */
async function warm(t: TestServer, key: string) {
  for (let i = 0; i < 3; i++) expect((await stats(t, key)).status).to.equal(200);
}

if (redisUrl && backends.includes('postgresql')) {
  describe('cached API keys across two instances (PostgreSQL + Redis)', () => {
    let a: TestServer;
    let b: TestServer;
    let close: () => Promise<void>;
    // Both instances' clock: moved past a key's expiry instead of waiting for it.
    const clock = testClock();
    // Cached for a minute, not a second: within this test's few seconds
    // only the change notice can tell B of a change (a race against the
    // second's expiry measured the notice, in under 100 ms, but flaked on a
    // loaded machine).
    before(async () => {
      const db = await createTestDatabase();
      const env = { DATABASE_URL: db.url, REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: freshPrefix() };
      a = await startTestServer('postgresql', env, undefined, { callerCacheMs: 60_000, clock });
      b = await startTestServer('postgresql', env, undefined, { callerCacheMs: 60_000, clock });
      close = async () => {
        await a.close();
        await b.close();
        await db.drop();
      };
    });
    after(() => close());

    it('when a key is rotated on instance A, then instance B, told by the change notice, refuses the old key and takes the new one', async () => {
      const { accountId, apiKey } = await a.account();
      await warm(b, apiKey);
      const rotated = await a.admin('POST', `/admin/accounts/${accountId}/keys`);
      expect(await statusBecomes(b, apiKey, 401)).to.equal(401);
      expect((await stats(b, rotated.api_key)).status).to.equal(200);
    });

    it('when an owner revokes a key on instance A, then instance B, told by the change notice, answers it 401 within a second, and the owner\'s other keys still work there', async () => {
      const { apiKey: owner } = await a.account();
      const made = await call(a.url('/api/v1/keys'), { method: 'POST', key: owner, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'leaked', scopes: ['stats:read'] }) });
      const leaked = made.body.key.api_key as string;
      await warm(b, leaked);
      await warm(b, owner);
      const started = Date.now();
      expect((await call(a.url(`/api/v1/keys/${made.body.key.key_id}`), { method: 'DELETE', key: owner })).status).to.equal(200);
      expect(await statusBecomes(b, leaked, 401)).to.equal(401);
      expect(Date.now() - started).to.be.below(1000);
      expect((await stats(b, owner)).status).to.equal(200);
    });

    it('when a key expires, then both instances, each holding it in its cache, answer it 401', async () => {
      const { apiKey: owner } = await a.account();
      const made = await call(a.url('/api/v1/keys'), { method: 'POST', key: owner, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'brief', scopes: ['stats:read'], expires_in: 1 }) });
      const brief = made.body.key.api_key as string;
      expect((await stats(a, brief)).status).to.equal(200);
      expect((await stats(b, brief)).status).to.equal(200);
      clock.advance(1000);
      expect((await stats(a, brief)).status).to.equal(401);
      expect((await stats(b, brief)).status).to.equal(401);
    });

    it('when a plan loses API access on instance A, then instance B, told by the change notice, answers 403', async () => {
      await a.plan('switchable', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 10, daily_uploads: 1 });
      const { apiKey } = await a.account('switchable');
      await warm(b, apiKey);
      await a.plan('switchable', { api_access: false });
      expect(await statusBecomes(b, apiKey, 403)).to.equal(403);
    });

    it('when a plan lowers its per-minute limit on instance A, then instance B, told by the change notice, holds the account to it', async () => {
      await a.plan('lowered', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 10, daily_uploads: 1 });
      const { apiKey } = await a.account('lowered');
      await warm(b, apiKey);
      await a.plan('lowered', { requests_per_minute: 3 });
      expect(await statusBecomes(b, apiKey, 429)).to.equal(429);
      expect((await stats(b, apiKey)).headers.get('ratelimit-policy')).to.match(/^"minute";q=3;/);
    });

    it("when an account's plan is changed on instance A, then instance B, told by the change notice, sees the new plan", async () => {
      const { accountId, apiKey } = await a.account('pro');
      await warm(b, apiKey);
      await a.admin('PATCH', `/admin/accounts/${accountId}`, { plan: 'free' });
      expect(await statusBecomes(b, apiKey, 403)).to.equal(403);
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
      expect(await statusBecomes(b, apiKey, 401)).to.equal(401);
      expect(Date.now() - started).to.be.below(1300);
    });
  });
}

if (backends.includes('postgresql')) {
  describe('cached API keys across two instances (PostgreSQL NOTIFY, no Redis)', () => {
    let a: TestServer;
    let b: TestServer;
    let close: () => Promise<void>;
    // Cached for a minute, as above: only the change notice can tell B in time.
    before(async () => {
      ({ a, b, close } = await startTwoInstances({}, {}, { callerCacheMs: 60_000 }));
    });
    after(() => close());

    it('when a key is rotated on instance A, then instance B, told by the change notice over PostgreSQL, refuses the old key and takes the new one', async () => {
      const { accountId, apiKey } = await a.account();
      await warm(b, apiKey);
      const rotated = await a.admin('POST', `/admin/accounts/${accountId}/keys`);
      expect(await statusBecomes(b, apiKey, 401)).to.equal(401);
      expect((await stats(b, rotated.api_key)).status).to.equal(200);
    });
  });
}
