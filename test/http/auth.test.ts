import { expect } from 'chai';
import { backends } from '../helpers/databases.js';
import { call } from '../helpers/client.js';
import type { TestServer } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';

for (const backend of backends) {
  describe(`authentication and errors (${backend})`, () => {
    let t: TestServer;
    before(async () => {
      t = await sharedServer(backend);
    });
    const stats = (headers: Record<string, string> = {}) => call(t.url('/api/v1/stats'), { headers });

    it('when the Authorization header is missing, then 401 missing_api_key with WWW-Authenticate: Bearer', async () => {
      const res = await stats();
      expect(res.status).to.equal(401);
      expect(res.headers.get('www-authenticate')).to.match(/^Bearer/);
      expect(res.body).to.deep.equal({
        success: false,
        error: { code: 'missing_api_key', message: 'Authorization header with a Bearer API key is required' },
      });
    });

    for (const [what, header] of [
      ['an unknown key', 'Bearer ds_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'],
      ['the wrong scheme', 'Basic dXNlcjpwYXNz'],
      ['an empty bearer', 'Bearer '],
      ['garbage', 'Bearer \u00ff\u00fe not a key'],
    ] as const) {
      it(`when the header carries ${what}, then 401 invalid_api_key with WWW-Authenticate`, async () => {
        const res = await stats({ Authorization: header });
        expect(res.status).to.equal(401);
        expect(res.headers.get('www-authenticate')).to.match(/^Bearer/);
        expect(res.body.error.code).to.equal('invalid_api_key');
      });
    }

    it('when the key is sent in the query string, then it is not accepted', async () => {
      const { apiKey } = await t.account();
      const res = await call(t.url(`/api/v1/stats?api_key=${apiKey}`));
      expect(res.status).to.equal(401);
    });

    it('when the scheme is written in lower case, then the key is still accepted', async () => {
      const { apiKey } = await t.account();
      expect((await stats({ Authorization: `bearer ${apiKey}` })).status).to.equal(200);
    });

    it('when the account is on a plan without API access, then 403 plan_without_api_access', async () => {
      const { apiKey } = await t.account('free');
      const res = await stats({ Authorization: `Bearer ${apiKey}` });
      expect(res.status).to.equal(403);
      expect(res.body.error.code).to.equal('plan_without_api_access');
    });

    it("when an account's plan changes, then the next request sees the new plan", async () => {
      const { accountId, apiKey } = await t.account('pro');
      await t.admin('PATCH', `/admin/accounts/${accountId}`, { plan: 'free' });
      expect((await stats({ Authorization: `Bearer ${apiKey}` })).status).to.equal(403);
      await t.admin('PATCH', `/admin/accounts/${accountId}`, { plan: 'business' });
      expect((await stats({ Authorization: `Bearer ${apiKey}` })).body.plan).to.equal('business');
    });

    it('when a key is rotated, then the old key is refused at once and the new one works', async () => {
      const { accountId, apiKey } = await t.account();
      const rotated = await t.admin('POST', `/admin/accounts/${accountId}/keys`);
      expect(rotated.api_key).to.match(/^ds_live_[A-Za-z0-9_-]{32}$/);
      expect(rotated.api_key).to.not.equal(apiKey);
      expect((await stats({ Authorization: `Bearer ${apiKey}` })).status).to.equal(401);
      expect((await stats({ Authorization: `Bearer ${rotated.api_key}` })).status).to.equal(200);
    });

    it('when keys are stored, then only their SHA-256 is in the database', async () => {
      const { apiKey } = await t.account();
      const rows = await t.server.db.prisma.apiKey.findMany();
      const { createHash } = await import('node:crypto');
      const hash = createHash('sha256').update(apiKey).digest('hex');
      expect(rows.some((r) => r.hash === hash)).to.equal(true);
      expect(JSON.stringify(rows.map((r) => ({ ...r, createdAt: 0, revokedAt: 0 })))).to.not.include(apiKey);
    });

    it('when the route is unknown, then 404 JSON not_found', async () => {
      const { apiKey } = await t.account();
      for (const path of ['/nope', '/api/v1/nope', '/api/v2/files']) {
        const res = await call(t.url(path), { key: apiKey });
        expect(res.status, path).to.equal(404);
        expect(res.headers.get('content-type')).to.match(/^application\/json/);
        expect(res.body.success).to.equal(false);
      }
    });

    it('when the method is not allowed, then 405 JSON with Allow', async () => {
      const { apiKey } = await t.account();
      const res = await call(t.url('/api/v1/stats'), { method: 'POST', key: apiKey });
      expect(res.status).to.equal(405);
      expect(res.body.error.code).to.equal('method_not_allowed');
      expect(res.headers.get('allow')).to.include('GET');
    });

    it('when a request carries X-Request-Id, then the response returns it, on success and on error', async () => {
      const ok = await call(t.url('/api/v1/stats'), { headers: { 'X-Request-Id': 'abc-123' } });
      expect(ok.headers.get('x-request-id')).to.equal('abc-123');
      const generated = await call(t.url('/nope'));
      expect(generated.headers.get('x-request-id')).to.match(/^[0-9a-f-]{36}$/);
    });

    describe('admin API', () => {
      it('when the admin token is wrong or missing, then 401', async () => {
        for (const auth of [undefined, 'Bearer wrong', `Basic ${t.server.adminToken}`]) {
          const res = await call(`${t.server.adminUrl}/admin/plans`, { headers: auth ? { Authorization: auth } : {} });
          expect(res.status).to.equal(401);
          expect(res.body.error.code).to.equal('invalid_admin_token');
        }
      });

      it('when an account is created on an unknown plan, then 404 plan_not_found', async () => {
        const res = await call(`${t.server.adminUrl}/admin/accounts`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${t.server.adminToken}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ plan: 'platinum' }),
        });
        expect(res.status).to.equal(404);
        expect(res.body.error.code).to.equal('plan_not_found');
      });

      it('when the body is not JSON or has unknown fields, then 400', async () => {
        const headers = { Authorization: `Bearer ${t.server.adminToken}`, 'Content-Type': 'application/json' };
        const bad = await call(`${t.server.adminUrl}/admin/plans/x`, { method: 'PUT', headers, body: '{nope' });
        expect(bad.status).to.equal(400);
        const unknown = await call(`${t.server.adminUrl}/admin/plans/x`, { method: 'PUT', headers, body: '{"color":"red"}' });
        expect(unknown.status).to.equal(400);
        expect(unknown.body.error.code).to.equal('invalid_request');
      });

      it('when the same email is used twice, then 409 email_taken', async () => {
        const email = `dup-${Date.now()}@example.com`;
        await t.admin('POST', '/admin/accounts', { plan: 'pro', email });
        const res = await call(`${t.server.adminUrl}/admin/accounts`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${t.server.adminToken}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ plan: 'pro', email }),
        });
        expect(res.status).to.equal(409);
        expect(res.body.error.code).to.equal('email_taken');
      });
    });
  });
}
