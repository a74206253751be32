// Through the apps' callbacks: no port is opened (test/helpers/built-server.ts).
import { expect } from 'chai';
import { buildTestServer, type BuiltTestServer } from '../helpers/built-server.js';

describe('CORS', () => {
  let off: BuiltTestServer;
  let on: BuiltTestServer;
  before(async () => {
    off = await buildTestServer('pglite');
    on = await buildTestServer('pglite', { CORS_ORIGINS: 'https://app.example' });
  });
  after(async () => {
    await off.close();
    await on.close();
  });

  const preflight = (t: BuiltTestServer, origin: string) =>
    t.fetch('/api/v1/stats', {
      method: 'OPTIONS',
      headers: { Origin: origin, 'Access-Control-Request-Method': 'GET', 'Access-Control-Request-Headers': 'authorization' },
    });

  it('when CORS_ORIGINS is not set, then no Access-Control headers are sent', async () => {
    const { apiKey } = await off.account();
    const res = await off.fetch('/api/v1/stats', { headers: { Origin: 'https://app.example', Authorization: `Bearer ${apiKey}` } });
    expect(res.status).to.equal(200);
    expect(res.headers.get('access-control-allow-origin')).to.equal(null);
    expect((await preflight(off, 'https://app.example')).headers.get('access-control-allow-origin')).to.equal(null);
  });

  it('when the origin is configured, then preflight and responses allow it and expose the limit headers', async () => {
    const pre = await preflight(on, 'https://app.example');
    expect(pre.status).to.equal(204);
    expect(pre.headers.get('access-control-allow-origin')).to.equal('https://app.example');
    expect(pre.headers.get('access-control-allow-headers')).to.include('Authorization');
    const { apiKey } = await on.account();
    const res = await on.fetch('/api/v1/stats', { headers: { Origin: 'https://app.example', Authorization: `Bearer ${apiKey}` } });
    expect(res.headers.get('access-control-allow-origin')).to.equal('https://app.example');
    expect(res.headers.get('access-control-expose-headers')).to.include('X-RateLimit-Remaining');
    expect(res.headers.get('access-control-allow-credentials')).to.equal(null);
  });

  it('when another origin asks, then it is not allowed', async () => {
    const res = await preflight(on, 'https://evil.example');
    expect(res.headers.get('access-control-allow-origin')).to.equal(null);
  });
});
