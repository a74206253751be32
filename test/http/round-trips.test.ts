import { spawn, type ChildProcess } from 'node:child_process';
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
    let fencer: Redis;
    const prefix = freshPrefix();
    const seen: string[][] = [];
    // A Redis of this suite's own: round trips are counted from Redis's read
    // events over all its clients, which other suites running at the same
    // time (mocha --parallel) would add to on a shared one.
    let redisServer: ChildProcess;
    let privateUrl: string;
    before(async () => {
      const port = 20000 + Math.floor(Math.random() * 20000);
      privateUrl = `redis://127.0.0.1:${port}`;
      redisServer = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
      const probe = new Redis(privateUrl, { lazyConnect: true, retryStrategy: () => 50 });
      probe.on('error', () => {});
      await probe.connect().catch(() => {});
      for (let i = 0; i < 100 && probe.status !== 'ready'; i++) await new Promise((r) => setTimeout(r, 50));
      probe.disconnect();
      // MONITOR first, while no other client talks: ioredis fails the
      // monitor's set-up ("Command queue state error") when another client's
      // command (the server's clients' ready checks, INFO) is reported in the
      // same read as MONITOR's OK.
      const base = new Redis(privateUrl, { lazyConnect: true });
      monitor = await base.monitor();
      base.disconnect();
      t = await startTestServer('pglite', { REDIS_URL: privateUrl, REDIS_KEY_PREFIX: prefix, AUTH_FAILURE_LIMIT: '3' });
      fencer = new Redis(privateUrl);
      // Commands a Lua script runs inside Redis show up as coming from "lua"; they are not round trips.
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (source !== 'lua' && args.some((a) => a.includes(prefix))) seen.push(args);
      });
    });
    after(async () => {
      monitor.disconnect();
      fencer.disconnect();
      await t.close();
      redisServer.kill('SIGKILL');
    });
    /**
     * A command of our own that MONITOR reports once Redis has run it, so
     * every command sent before it has been seen: the end of a window,
     * instead of a sleep.
     */
    let fences = 0;
    const fence = async () => {
      const name = `${prefix}:fence:${++fences}`;
      await fencer.exists(name);
      const deadline = Date.now() + 10_000;
      while (!seen.some((args) => args.includes(name)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      if (!seen.some((args) => args.includes(name))) throw new Error(`MONITOR never showed ${name}`);
    };
    /** Read events Redis has processed, over all its clients: each network round trip of a client is one. */
    const reads = async () => Number(/total_reads_processed:(\d+)/.exec(await fencer.info('stats'))![1]);
    /**
     * The commands `work` sent, and the round trips they took: Redis's read
     * events meanwhile, less the fence's EXISTS and the INFO that reads the
     * count (nothing else talks to this Redis while the suite runs).
     */
    const commands = async (work: () => Promise<void>) => {
      await fence();
      seen.length = 0;
      const before = await reads();
      await work();
      await fence();
      const trips = (await reads()) - before - 2;
      const sent = seen.filter((args) => !args.some((a) => a.startsWith(`${prefix}:fence:`))).map((args) => args[0]!.toLowerCase());
      return Object.assign(sent, { trips });
    };

    it('when a key makes 10 requests, then each request is the two rate-limiter-flexible counters (minute, day) in one round trip, and nothing else', async () => {
      const { apiKey } = await t.account();
      expect((await call(t.url('/api/v1/stats'), { key: apiKey })).status).to.equal(200); // loads the script
      const sent = await commands(async () => {
        for (let i = 0; i < 10; i++) expect((await call(t.url('/api/v1/stats'), { key: apiKey })).status).to.equal(200);
      });
      expect([...sent]).to.deep.equal(Array(20).fill('evalsha'));
      expect(sent.trips).to.equal(10);
    });

    it('when a request is refused by the minute limit, then the day point is given back in a second round trip, on that refusal only', async () => {
      await t.plan('three-a-minute', { api_access: true, requests_per_minute: 3, requests_per_day: 100, max_file_size: 10, daily_uploads: 1 });
      const { apiKey } = await t.account('three-a-minute');
      // The first request of a plan's numbers makes its limiters, whose script goes out once as EVAL.
      expect((await call(t.url('/api/v1/stats'), { key: apiKey })).status).to.equal(200);
      const statuses: number[] = [];
      const sent = await commands(async () => {
        for (let i = 0; i < 3; i++) statuses.push((await call(t.url('/api/v1/stats'), { key: apiKey })).status);
      });
      expect(statuses).to.deep.equal([200, 200, 429]);
      expect([...sent]).to.deep.equal(Array(7).fill('evalsha'));
      expect(sent.trips).to.equal(4);
    });

    it('when a resumable upload is created, written and asked about (tus), then each request is the two counters in one round trip, and a PATCH with a body also takes and gives back its account slot, one trip each', async () => {
      const { apiKey } = await t.account();
      // Loads the scripts: the counters', and the account slots' (every plan has a cap, issue 38).
      const warm = uploadUrl(t.server.url, await create(t.server.url, apiKey, { length: 1 }));
      expect((await patch(warm, apiKey, 0, Buffer.from('w'))).status).to.equal(204);
      const sent = await commands(async () => {
        const url = uploadUrl(t.server.url, await create(t.server.url, apiKey, { length: 6 }));
        expect((await patch(url, apiKey, 0, Buffer.from('abc'))).status).to.equal(204);
        expect((await head(url, apiKey)).status).to.equal(200);
        expect((await patch(url, apiKey, 3, Buffer.from('def'))).status).to.equal(204);
      });
      const counters = ['evalsha', 'evalsha'];
      const slot = ['evalsha', 'zrem'];
      expect([...sent]).to.deep.equal([...counters, ...counters, ...slot, ...counters, ...counters, ...slot]);
      expect(sent.trips).to.equal(4 + 2 * 2);
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
