// Issue 38, item 2 and TRUST_PROXY: an IPv6 client is its /64 in every limit
// counted per client (src/client-key.ts), and X-Forwarded-For is believed only
// from the proxies TRUST_PROXY lists. Addresses come through a trusted proxy's
// header here; test/security/ipv6-netns.test.ts uses real IPv6 sockets.
import { request } from 'node:http';
import { expect } from 'chai';
import { clientKey, proxyMatcher } from '../../src/client-key.js';
import { loadConfig } from '../../src/config.js';
import { upload } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { captureLog } from '../helpers/log-capture.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('client keys', () => {
  it('when an address is IPv4, then it is its own key; IPv4-mapped IPv6 is the IPv4', () => {
    expect(clientKey('5.5.1.1', 64)).to.equal('5.5.1.1');
    expect(clientKey('::ffff:5.5.1.1', 64)).to.equal('5.5.1.1');
    expect(clientKey('::FFFF:5.5.1.1', 64)).to.equal('5.5.1.1');
  });

  it('when IPv6 addresses share their first 64 bits, then they are one key (the /64), and another /64 is another', () => {
    const a = clientKey('2001:db8:1:2::5', 64);
    expect(a).to.equal('2001:db8:1:2::/64');
    expect(clientKey('2001:db8:1:2:ffff:ffff:ffff:ffff', 64)).to.equal(a);
    expect(clientKey('2001:0db8:0001:0002:0000:0000:0000:0009', 64), 'written out in full').to.equal(a);
    expect(clientKey('2001:db8:1:3::5', 64)).to.not.equal(a);
  });

  it('when CLIENT_IPV6_PREFIX is 48 or 128, then the key is the /48, or the address itself', () => {
    expect(clientKey('2001:db8:1:2::5', 48)).to.equal('2001:db8:1::/48');
    expect(clientKey('2001:db8:1:ffff::5', 48)).to.equal('2001:db8:1::/48');
    expect(clientKey('2001:db8:1:2::5', 128)).to.equal('2001:db8:1:2::5');
  });

  it('when TRUST_PROXY lists addresses and ranges, then only peers inside them are proxies (an IPv4-mapped peer compares as IPv4)', () => {
    const isProxy = proxyMatcher(['10.0.0.5', '10.1.0.0/16', 'fd00::/8']);
    expect(['10.0.0.5', '::ffff:10.0.0.5', '10.1.200.3', 'fd12::1'].map(isProxy)).to.deep.equal([true, true, true, true]);
    expect(['10.0.0.6', '10.2.0.1', '127.0.0.1', 'fe80::1', 'not an address'].map(isProxy)).to.deep.equal([false, false, false, false, false]);
    expect(proxyMatcher('all')('203.0.113.9')).to.equal(true);
    expect(proxyMatcher('none')('10.0.0.5')).to.equal(false);
  });

  it('when TRUST_PROXY and CLIENT_IPV6_PREFIX are read, then true, false and lists are taken, and anything else stops start naming the variable', () => {
    expect(loadConfig({}).trustProxy).to.equal(false);
    expect(loadConfig({ TRUST_PROXY: 'true' })).to.include({ trustProxy: true, trustedProxies: undefined });
    expect(loadConfig({ TRUST_PROXY: '10.0.0.5, 10.1.0.0/16' })).to.deep.include({ trustProxy: true, trustedProxies: ['10.0.0.5', '10.1.0.0/16'] });
    expect(() => loadConfig({ TRUST_PROXY: '10.0.0.5,proxy.internal' })).to.throw(/TRUST_PROXY: must be true, false, or a comma-separated list/);
    expect(() => loadConfig({ TRUST_PROXY: '10.0.0.0/33' })).to.throw(/TRUST_PROXY/);
    expect(loadConfig({}).clientIpv6Prefix).to.equal(64);
    expect(loadConfig({ CLIENT_IPV6_PREFIX: '56' }).clientIpv6Prefix).to.equal(56);
    expect(() => loadConfig({ CLIENT_IPV6_PREFIX: '129' })).to.throw(/CLIENT_IPV6_PREFIX/);
    expect(() => loadConfig({ CLIENT_IPV6_PREFIX: '0' })).to.throw(/CLIENT_IPV6_PREFIX/);
  });
});

/** A GET from `localAddress` with X-Forwarded-For `forwardedFor` (and a Bearer key, or Basic password, when given). */
function get(url: string, { localAddress = '127.0.0.1', forwardedFor, key, password }: { localAddress?: string; forwardedFor?: string; key?: string; password?: string }) {
  const headers: Record<string, string> = {};
  if (forwardedFor) headers['X-Forwarded-For'] = forwardedFor;
  if (key) headers.Authorization = `Bearer ${key}`;
  if (password) headers.Authorization = `Basic ${Buffer.from(`:${password}`).toString('base64')}`;
  return new Promise<{ status: number; code?: string }>((resolve, reject) => {
    request(url, { localAddress, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d) => (body += d)).on('end', () => {
        let code: string | undefined;
        try {
          code = JSON.parse(body).error?.code;
        } catch {}
        resolve({ status: res.statusCode!, code });
      });
    }).on('error', reject).end();
  });
}

for (const backend of backends) {
  describe(`IPv6 clients behind a trusted proxy (${backend})`, () => {
    let t: TestServer;
    const log = captureLog();
    before(async () => {
      // The proxy is 127.0.0.1; the test's other loopback addresses are clients reaching the app directly.
      t = await startTestServer(backend, { TRUST_PROXY: '127.0.0.1', AUTH_FAILURE_LIMIT: '3', LINK_FAILURE_LIMIT: '3' }, log.logger);
    });
    after(() => t?.close());

    it('when bad keys come from 6 addresses of one /64, then the fourth is refused, and another /64 is not', async () => {
      const statuses: number[] = [];
      for (let i = 1; i <= 6; i++) statuses.push((await get(t.url('/api/v1/stats'), { forwardedFor: `2001:db8:a:1::${i}`, key: `ds_live_wrong${i}` })).status);
      expect(statuses).to.deep.equal([401, 401, 401, 429, 429, 429]);
      expect((await get(t.url('/api/v1/stats'), { forwardedFor: '2001:db8:a:2::1', key: 'ds_live_wrong' })).status).to.equal(401);
    });

    it('when wrong link passwords come from rotating addresses of one /64, then the guesses are refused after the limit, the right password too', async () => {
      const { apiKey } = await t.account();
      const res = await upload(t.server.url, apiKey, [{ name: 'password', content: 'right' }, { name: 'file', filename: 'guarded.txt', content: 'guarded' }]);
      expect(res.status).to.equal(201);
      const link = t.url(res.body.public_link);
      const codes: (string | undefined)[] = [];
      for (let i = 1; i <= 5; i++) codes.push((await get(link, { forwardedFor: `2001:db8:b:1:${i}::1`, password: `wrong${i}` })).code);
      expect(codes).to.deep.equal(['wrong_password', 'wrong_password', 'wrong_password', 'too_many_failures', 'too_many_failures']);
      expect((await get(link, { forwardedFor: '2001:db8:b:1:ffff::9', password: 'right' })).status).to.equal(429);
      expect((await get(link, { forwardedFor: '2001:db8:b:2::1', password: 'right' })).status, 'another /64').to.equal(200);
    });

    it('when an IPv4-mapped address is forwarded, then it counts as its IPv4', async () => {
      for (let i = 1; i <= 3; i++) expect((await get(t.url('/api/v1/stats'), { forwardedFor: '5.5.9.1', key: `ds_live_wrong${i}` })).status).to.equal(401);
      expect((await get(t.url('/api/v1/stats'), { forwardedFor: '::ffff:5.5.9.1', key: 'ds_live_wrong' })).status).to.equal(429);
    });

    it('when a peer outside TRUST_PROXY rotates X-Forwarded-For, then the header is ignored, its guesses count as the peer, and a warning says so', async () => {
      const statuses: number[] = [];
      for (let i = 1; i <= 5; i++) statuses.push((await get(t.url('/api/v1/stats'), { localAddress: '127.0.0.5', forwardedFor: `203.0.113.${i}`, key: `ds_live_wrong${i}` })).status);
      expect(statuses).to.deep.equal([401, 401, 401, 429, 429]);
      const warnings = log.lines.filter((l) => String(l.msg).startsWith('X-Forwarded-For from a peer that is not in TRUST_PROXY'));
      expect(warnings, 'once a minute at most').to.have.length(1);
      expect(warnings[0]!.peer).to.equal('127.0.0.5');
    });

    it('when a forwarded entry is not an address, then the peer counts instead (a new string per request would be a new client)', async () => {
      const statuses: number[] = [];
      for (let i = 1; i <= 4; i++) statuses.push((await get(t.url('/api/v1/stats'), { forwardedFor: `junk-${i}`, key: `ds_live_wrong${i}` })).status);
      expect(statuses).to.deep.equal([401, 401, 401, 429]);
    });
  });
}

describe('TRUST_PROXY=true', () => {
  it('when the server starts with TRUST_PROXY=true, then it warns that every peer is believed; with a list, it does not', async () => {
    for (const [value, warned] of [['true', 1], ['127.0.0.1', 0]] as const) {
      const log = captureLog();
      const t = await startTestServer('pglite', { TRUST_PROXY: value }, log.logger);
      try {
        expect(log.lines.filter((l) => String(l.msg).startsWith('TRUST_PROXY=true believes X-Forwarded-For from every peer')), value).to.have.length(warned);
      } finally {
        await t.close();
      }
    }
  });
});
