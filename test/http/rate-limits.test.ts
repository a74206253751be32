import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { call, uploadFile, type ApiResponse } from '../helpers/client.js';
import { backends, createTestDatabase } from '../helpers/databases.js';
import { freshPrefix, redisUrl } from '../helpers/redis.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const today = () => new Date().toISOString().slice(0, 10);
const stats = (t: TestServer, key: string) => call(t.url('/api/v1/stats'), { key });

/** The limit-state headers every API response carries. */
function limitHeaders(res: ApiResponse) {
  return {
    limit: Number(res.headers.get('x-ratelimit-limit')),
    remaining: Number(res.headers.get('x-ratelimit-remaining')),
    reset: Number(res.headers.get('x-ratelimit-reset')),
    policy: res.headers.get('ratelimit-policy'),
    state: res.headers.get('ratelimit'),
  };
}

/** The behaviour of one instance's limits, with or without Redis behind them. */
function singleInstanceSuite(name: string, env: () => Record<string, string>) {
  describe(`request limits on one instance: ${name}`, () => {
    let t: TestServer;
    before(async () => {
      t = await startTestServer('pglite', { ...env(), AUTH_FAILURE_LIMIT: '5', LINK_FAILURE_LIMIT: '5' });
    });
    after(async () => {
      await t.close();
    });

    it('when a Pro account makes 51 requests in a minute, then the first 50 pass with the headers counting down and the 51st gets 429', async () => {
      const { apiKey } = await t.account('pro');
      for (let i = 1; i <= 50; i++) {
        const res = await stats(t, apiKey);
        expect(res.status, `request ${i}`).to.equal(200);
        const h = limitHeaders(res);
        expect(h.limit).to.equal(50);
        expect(h.remaining).to.equal(50 - i);
        expect(h.policy).to.equal('"minute";q=50;w=60, "day";q=5000;w=86400');
        expect(h.state).to.match(new RegExp(`^"minute";r=${50 - i};t=\\d+$`));
      }
      const refused = await stats(t, apiKey);
      expect(refused.status).to.equal(429);
      expect(refused.body.error.code).to.equal('rate_limited');
      const retryAfter = refused.headers.get('retry-after')!;
      expect(retryAfter).to.match(/^\d+$/);
      expect(Number(retryAfter)).to.be.within(1, 60);
      const h = limitHeaders(refused);
      expect(h.remaining).to.equal(0);
      expect(Math.abs(h.reset - Math.floor(Date.now() / 1000) - Number(retryAfter))).to.be.at.most(2);

      const other = await t.account('pro');
      const res = await stats(t, other.apiKey);
      expect(res.status).to.equal(200);
      expect(limitHeaders(res).remaining).to.equal(49);
    });

    it('when requests are refused with 403, then they do not count', async () => {
      await t.plan('five-a-minute', { api_access: true, requests_per_minute: 5, requests_per_day: 1000, max_file_size: 10, daily_uploads: 100 });
      const { apiKey } = await t.account('five-a-minute');
      for (let i = 0; i < 4; i++) {
        const res = await uploadFile(t.server.url, apiKey, 'big.bin', randomBytes(11));
        expect(res.status).to.equal(403);
      }
      for (let i = 0; i < 5; i++) expect((await stats(t, apiKey)).status, `request ${i}`).to.equal(200);
      expect((await stats(t, apiKey)).status).to.equal(429);
    });

    it('when a plan change lowers the limit, then the next request is held to it', async () => {
      await t.plan('flex', { api_access: true, requests_per_minute: 100, requests_per_day: 1000, max_file_size: 10, daily_uploads: 1 });
      const { apiKey } = await t.account('flex');
      for (let i = 0; i < 10; i++) expect((await stats(t, apiKey)).status).to.equal(200);
      await t.plan('flex', { requests_per_minute: 12 });
      expect((await stats(t, apiKey)).status).to.equal(200);
      const last = await stats(t, apiKey);
      expect(last.status).to.equal(200);
      expect(limitHeaders(last).remaining).to.equal(0);
      expect((await stats(t, apiKey)).status).to.equal(429);
    });

    it('when an address sends bad keys repeatedly, then its guesses are refused with 429 and a good key still passes (issue 27)', async () => {
      const { apiKey } = await t.account();
      for (let i = 0; i < 5; i++) {
        expect((await call(t.url('/api/v1/stats'), { key: `ds_live_wrong${i}` })).status).to.equal(401);
      }
      const blocked = await call(t.url('/api/v1/stats'), { key: 'ds_live_wrong' });
      expect(blocked.status).to.equal(429);
      expect(blocked.body.error.code).to.equal('too_many_failures');
      expect(Number(blocked.headers.get('retry-after'))).to.be.within(1, 60);
      expect((await stats(t, apiKey)).status).to.equal(200);
      expect((await call(t.url('/api/v1/stats'), { key: 'ds_live_wrong' })).status).to.equal(429);
    });

    it('when an address asks for unknown download links repeatedly, then it is refused with 429', async () => {
      for (let i = 0; i < 5; i++) {
        expect((await call(t.url(`/download/${randomBytes(16).toString('base64url')}`))).status).to.equal(404);
      }
      const blocked = await call(t.url(`/download/${randomBytes(16).toString('base64url')}`));
      expect(blocked.status).to.equal(429);
      expect(blocked.body.error.code).to.equal('too_many_failures');
    });
  });
}

singleInstanceSuite('in memory (no REDIS_URL)', () => ({}));

/** Downloads check the address and look the link up side by side; the answers are those of checking first. */
function linkFailureSuite(name: string, env: () => Record<string, string>) {
  describe(`unknown download links: ${name}`, () => {
    it('when downloads succeed, they never count; unknown and malformed links do; then guesses get 429 until the window ends while a valid link still downloads (issue 27)', async () => {
      const t = await startTestServer('pglite', { ...env(), LINK_FAILURE_LIMIT: '3' });
      try {
        const { apiKey } = await t.account();
        const link = t.url((await uploadFile(t.server.url, apiKey, 'valid.txt', 'valid')).body.public_link);
        for (let i = 0; i < 5; i++) expect((await call(link)).status).to.equal(200);
        expect((await call(t.url(`/download/${randomBytes(16).toString('base64url')}`))).status).to.equal(404);
        expect((await call(t.url('/download/not-a-token!'))).status).to.equal(404);
        expect((await call(link)).status).to.equal(200);
        expect((await call(t.url(`/download/${randomBytes(16).toString('base64url')}`))).status).to.equal(404);
        expect((await call(link)).status).to.equal(200);
        for (const url of [t.url('/download/not-a-token!'), t.url(`/download/${randomBytes(16).toString('base64url')}`)]) {
          const refused = await call(url, { method: 'GET' });
          expect(refused.status, url).to.equal(429);
          expect(refused.body.error.code).to.equal('too_many_failures');
          expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 60);
          expect(refused.headers.get('content-disposition')).to.equal(null);
        }
        const metrics = await call(`${t.server.adminUrl}/metrics`, { key: t.server.adminToken });
        expect(metrics.text).to.match(/^dropstream_rate_limit_refusals_total\{reason="link_failures"\} 2$/m);
      } finally {
        await t.close();
      }
    });
  });
}

linkFailureSuite('in memory (no REDIS_URL)', () => ({}));
if (redisUrl) linkFailureSuite('Redis', () => ({ REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: freshPrefix() }));

if (redisUrl) {
  singleInstanceSuite('Redis', () => ({ REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: freshPrefix() }));

  describe('request limits when Redis is unreachable', () => {
    let t: TestServer;
    const logLines: { msg?: string }[] = [];
    before(async () => {
      const logger = pino({ level: 'warn' }, { write: (line: string) => void logLines.push(JSON.parse(line)) });
      t = await startTestServer('pglite', { REDIS_URL: 'redis://127.0.0.1:1', REDIS_KEY_PREFIX: freshPrefix() }, logger);
    });
    after(async () => {
      await t.close();
    });

    it('when Redis is down, then requests still answer within a second, limits hold per instance, and /readyz says degraded', async () => {
      const { apiKey } = await t.account('pro');
      for (let i = 1; i <= 50; i++) {
        const started = Date.now();
        const res = await stats(t, apiKey);
        expect(Date.now() - started, `request ${i}`).to.be.below(1000);
        expect(res.status).to.equal(200);
        expect(limitHeaders(res).remaining).to.equal(50 - i);
      }
      expect((await stats(t, apiKey)).status).to.equal(429);
      const ready = await call(t.url('/readyz'));
      expect(ready.status).to.equal(200);
      expect(ready.body).to.deep.equal({ status: 'degraded', checks: { database: 'ok', store: 'ok', redis: 'degraded' } });
      expect(logLines.filter((l) => l.msg?.startsWith('redis unreachable'))).to.have.length(1);
    });
  });

  describe('request limits when Redis goes away and comes back', () => {
    let t: TestServer;
    let redisServer: ChildProcess | undefined;
    let port: number;
    const prefix = freshPrefix();
    const startRedis = async () => {
      redisServer = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
      const probe = new Redis({ port, lazyConnect: true, retryStrategy: () => 50 });
      probe.on('error', () => {});
      await probe.connect().catch(() => {});
      for (let i = 0; i < 100 && probe.status !== 'ready'; i++) await new Promise((r) => setTimeout(r, 50));
      probe.disconnect();
    };
    const minuteCount = async (accountId: number) => {
      const redis = new Redis({ port });
      try {
        return await redis.get(`${prefix}:rl:minute:${accountId}`);
      } finally {
        redis.disconnect();
      }
    };
    before(async () => {
      port = 20000 + Math.floor(Math.random() * 20000);
      await startRedis();
      t = await startTestServer('pglite', { REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_KEY_PREFIX: prefix });
    });
    after(async () => {
      await t.close();
      redisServer?.kill('SIGKILL');
    });

    it('when Redis stops, then requests keep answering in memory, and when it returns, counting goes back to Redis', async () => {
      const { accountId, apiKey } = await t.account('pro');
      for (let i = 0; i < 3; i++) expect((await stats(t, apiKey)).status).to.equal(200);
      expect(await minuteCount(accountId)).to.equal('3');

      redisServer!.kill('SIGKILL');
      await once(redisServer!, 'exit');
      for (let i = 0; i < 3; i++) {
        const started = Date.now();
        expect((await stats(t, apiKey)).status).to.equal(200);
        // Not held up by Redis's connect timeout (a loaded machine answers in well under 2 s).
        expect(Date.now() - started).to.be.below(2000);
      }
      expect((await call(t.url('/readyz'))).body.checks.redis).to.equal('degraded');

      await startRedis();
      let redisState = '';
      for (let i = 0; i < 300 && redisState !== 'ok'; i++) {
        await new Promise((r) => setTimeout(r, 50));
        redisState = (await call(t.url('/readyz'))).body.checks.redis;
      }
      expect(redisState).to.equal('ok');
      for (let i = 0; i < 2; i++) expect((await stats(t, apiKey)).status).to.equal(200);
      // The new Redis started empty: it has counted exactly the requests since it came back.
      expect(await minuteCount(accountId)).to.equal('2');
    });
  });

  if (backends.includes('postgresql')) {
    describe('request limits across two instances (PostgreSQL + Redis)', () => {
      let a: TestServer;
      let b: TestServer;
      let drop: () => Promise<void>;
      let prefix: string;
      before(async () => {
        const db = await createTestDatabase();
        drop = db.drop;
        prefix = freshPrefix();
        const env: Record<string, string> = { DATABASE_URL: db.url, REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: prefix };
        a = await startTestServer('postgresql', env);
        b = await startTestServer('postgresql', env);
      });
      after(async () => {
        await a.close();
        await b.close();
        await drop();
      });

      it('when requests alternate between instances, then the limit is reached at the same global count', async () => {
        const { apiKey } = await a.account('pro');
        for (let i = 1; i <= 50; i++) {
          const res = await stats(i % 2 ? a : b, apiKey);
          expect(res.status, `request ${i}`).to.equal(200);
          expect(limitHeaders(res).remaining).to.equal(50 - i);
        }
        expect((await stats(a, apiKey)).status).to.equal(429);
        expect((await stats(b, apiKey)).status).to.equal(429);
      });

      it('when the per-day limit is set to 30 through the admin API, then request 31 is refused until UTC midnight', async () => {
        await a.plan('thirty-a-day', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 10, daily_uploads: 1 });
        const { apiKey } = await b.account('thirty-a-day');
        await b.plan('thirty-a-day', { requests_per_day: 30 });
        for (let i = 1; i <= 30; i++) expect((await stats(i % 2 ? a : b, apiKey)).status, `request ${i}`).to.equal(200);
        const refused = await stats(a, apiKey);
        expect(refused.status).to.equal(429);
        const untilMidnight = (Date.parse(`${today()}T00:00:00Z`) + 86_400_000 - Date.now()) / 1000;
        expect(Number(refused.headers.get('retry-after'))).to.be.closeTo(untilMidnight, 3);
        expect(refused.headers.get('ratelimit')).to.match(/^"day";r=0;t=\d+$/);
      });

      it('when a request is refused by the minute limit, then it spends no daily point', async () => {
        await a.plan('five-per-minute', { api_access: true, requests_per_minute: 5, requests_per_day: 100, max_file_size: 10, daily_uploads: 1 });
        const { accountId, apiKey } = await a.account('five-per-minute');
        const statuses: number[] = [];
        for (let i = 0; i < 8; i++) statuses.push((await stats(i % 2 ? a : b, apiKey)).status);
        expect(statuses).to.deep.equal([200, 200, 200, 200, 200, 429, 429, 429]);
        const redis = new Redis(redisUrl!);
        try {
          expect(await redis.get(`${prefix}:rl:day:${accountId}:${today()}`)).to.equal('5');
        } finally {
          redis.disconnect();
        }
      });

      it('when 16 uploads race across both instances for a quota of 5, then exactly 5 succeed', async () => {
        await a.plan('five-uploads', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 1000, daily_uploads: 5, concurrent_uploads: 16 });
        const { apiKey } = await a.account('five-uploads');
        const results = await Promise.all(
          Array.from({ length: 16 }, (_, i) => uploadFile((i % 2 ? a : b).server.url, apiKey, `race-${i}.txt`, `content ${i}`)),
        );
        expect(results.filter((r) => r.status === 201)).to.have.length(5);
        expect(results.filter((r) => r.status === 403 && r.body.error.code === 'daily_upload_limit')).to.have.length(11);
      });
    });
  }
}
