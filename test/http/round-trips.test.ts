import { expect } from 'chai';
import { Redis } from 'ioredis';
import { call } from '../helpers/client.js';
import { freshPrefix, redisUrl } from '../helpers/redis.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { create, head, patch, uploadUrl } from '../helpers/tus.js';

if (redisUrl) {
  describe('Redis round trips of API requests', () => {
    let t: TestServer;
    let monitor: Redis;
    const prefix = freshPrefix();
    const seen: string[][] = [];
    before(async () => {
      t = await startTestServer('pglite', { REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: prefix, AUTH_FAILURE_LIMIT: '3' });
      const base = new Redis(redisUrl!, { lazyConnect: true });
      monitor = await base.monitor();
      base.disconnect();
      // Commands a Lua script runs inside Redis show up as coming from "lua"; they are not round trips.
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (source !== 'lua' && args.some((a) => a.includes(prefix))) seen.push(args);
      });
    });
    after(async () => {
      monitor.disconnect();
      await t.close();
    });
    const commands = async (work: () => Promise<void>) => {
      await new Promise((r) => setTimeout(r, 50));
      seen.length = 0;
      await work();
      await new Promise((r) => setTimeout(r, 50));
      return seen.map((args) => args[0]!.toLowerCase());
    };

    it('when a key makes 10 requests, then Redis sees one script call per request and nothing else', async () => {
      const { apiKey } = await t.account();
      expect((await call(t.url('/api/v1/stats'), { key: apiKey })).status).to.equal(200); // loads the script
      const sent = await commands(async () => {
        for (let i = 0; i < 10; i++) expect((await call(t.url('/api/v1/stats'), { key: apiKey })).status).to.equal(200);
      });
      expect(sent).to.deep.equal(Array(10).fill('evalsha'));
    });

    it('when a resumable upload is created, written and asked about (tus), then each request is one script call, as on every API route', async () => {
      const { apiKey } = await t.account();
      expect((await call(t.url('/api/v1/stats'), { key: apiKey })).status).to.equal(200); // loads the script
      const sent = await commands(async () => {
        const url = uploadUrl(t.server.url, await create(t.server.url, apiKey, { length: 6 }));
        expect((await patch(url, apiKey, 0, Buffer.from('abc'))).status).to.equal(204);
        expect((await head(url, apiKey)).status).to.equal(200);
        expect((await patch(url, apiKey, 3, Buffer.from('def'))).status).to.equal(204);
      });
      expect(sent).to.deep.equal(Array(4).fill('evalsha'));
    });

    it('when an address sends bad keys, then each costs one command, and once refused it costs none', async () => {
      const statuses: number[] = [];
      const sent = await commands(async () => {
        for (let i = 0; i < 5; i++) statuses.push((await call(t.url('/api/v1/stats'), { key: `ds_live_wrong${i}` })).status);
      });
      expect(statuses).to.deep.equal([401, 401, 401, 429, 429]);
      // Three 401s and the fourth, which passes the limit (429), each count; the fifth is refused from memory.
      expect(sent).to.have.length(4);
    });
  });
}
