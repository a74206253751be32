// Issue 50, item 11: whoever has a password link's URL can make its
// password lock (LINK_PASSWORD_FAILURE_LIMIT wrong guesses from all
// addresses, 101 from two addresses within their own limits), again and
// again. With the defaults the lock lasts minutes (LINK_PASSWORD_LOCK, 300
// s), not an hour, for a download link and a file request alike; the
// per-address limit (LINK_FAILURE_LIMIT, 60 a minute) stays the first wall.
// On the in-memory limiters and on Redis (TEST_REDIS_URL).
import { expect } from 'chai';
import { call, upload, type ApiResponse } from '../helpers/client.js';
import { freshPrefix, redisUrl } from '../helpers/redis.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { linkPath, newRequest } from '../requests/helpers.js';

const basic = (password: string) => `Basic ${Buffer.from(`:${password}`).toString('base64')}`;
const get = (url: string, password: string, address: string): Promise<ApiResponse> =>
  call(url, { headers: { Authorization: basic(password), 'X-Forwarded-For': address } });

const limiters: [string, () => Record<string, string>][] = [['memory', () => ({})]];
if (redisUrl) limiters.push(['redis', () => ({ REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: freshPrefix() })]);

for (const [name, env] of limiters) {
  describe(`issue 50, item 11: a link's password lock lasts minutes (${name})`, function () {
    this.timeout(120_000);
    let t: TestServer;
    let key: string;
    before(async () => {
      // The password settings at their defaults; LINK_FAILURE_LIMIT back at its default (test servers raise it).
      t = await startTestServer('pglite', { ...env(), TRUST_PROXY: 'true', LINK_FAILURE_LIMIT: '60' });
      key = (await t.account()).apiKey;
    });
    after(async () => {
      await t?.close();
    });

    /**
     * 101 wrong passwords for `url` (the issue's figure), taking turns between two addresses (51
     * and 50, each within its 60 a minute), 8 at a time (within the scrypt
     * queue); then the right one from a third address: the lock's answer.
     */
    async function lockFromTwoAddresses(url: string, right: string, net: string): Promise<ApiResponse> {
      const answers: ApiResponse[] = [];
      for (let i = 0; i < 101; i += 8) {
        const batch = Array.from({ length: Math.min(8, 101 - i) }, (_, j) => get(url, `wrong ${i + j}`, `${net}.${(i + j) % 2}`));
        answers.push(...(await Promise.all(batch)));
      }
      const codes: Record<string, number> = {};
      for (const a of answers) codes[a.body.error.code] = (codes[a.body.error.code] ?? 0) + 1;
      // The limit's 100 were checked; the one past it set the lock.
      expect(codes, 'the 101 guesses').to.deep.equal({ wrong_password: 100, link_password_locked: 1 });
      return get(url, right, `${net}.9`);
    }

    const expectLockedForMinutes = (res: ApiResponse) => {
      expect(res.status, res.text).to.equal(429);
      expect(res.body.error.code).to.equal('link_password_locked');
      // An hour before (LINK_PASSWORD_LOCK 3600): the next 101 guesses lock it again for as long.
      expect(Number(res.headers.get('retry-after'))).to.be.within(240, 300);
    };

    it('when 101 wrong passwords for a download link come from two addresses, then its password is locked for at most 5 minutes', async () => {
      const res = await upload(t.server.url, key, [{ name: 'password', content: 'open sesame' }, { name: 'file', filename: 'a.txt', content: 'the secret' }]);
      expectLockedForMinutes(await lockFromTwoAddresses(t.url(res.body.public_link), 'open sesame', '10.50.1'));
    });

    it('when 101 wrong passwords for a file request come from two addresses, then its password is locked for at most 5 minutes', async () => {
      const request = await newRequest(t, key, { password: 'hunter22' });
      expectLockedForMinutes(await lockFromTwoAddresses(t.url(linkPath(request)), 'hunter22', '10.50.2'));
    });
  });
}
