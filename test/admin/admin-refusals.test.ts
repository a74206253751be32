// The admin API's refusals as an operator's script meets them over HTTP:
// an unknown account is 404 account_not_found, a malformed id or body 400
// invalid_request naming what is wrong, a body that is not JSON 400
// invalid_json, and nothing was changed by any of them.
import { expect } from 'chai';
import { call, type ApiResponse } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import type { TestServer } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';

for (const backend of backends) {
  describe(`admin API refusals over HTTP (${backend})`, () => {
    let t: TestServer;
    before(async () => {
      t = await sharedServer(backend);
    });

    const admin = (method: string, path: string, body?: unknown, raw?: string) =>
      call(`${t.server.adminUrl}${path}`, {
        method,
        key: t.server.adminToken,
        headers: { 'Content-Type': 'application/json' },
        body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
      });

    /** Every account's plan and every key's state, to show a refusal changed nothing. */
    const accountsAndKeys = async () => {
      const { prisma } = t.server.db;
      const [accounts, keys] = await Promise.all([
        prisma.account.findMany({ select: { id: true, planId: true }, orderBy: { id: 'asc' } }),
        prisma.apiKey.findMany({ select: { id: true, revokedAt: true }, orderBy: { id: 'asc' } }),
      ]);
      return { accounts, keys };
    };

    /** A JSON error with `status` and `code` whose message contains `says`. */
    function refused(res: ApiResponse, status: number, code: string, says: string | RegExp) {
      expect(res.status, res.text).to.equal(status);
      expect(res.headers.get('content-type')).to.match(/^application\/json/);
      expect(res.body.success).to.equal(false);
      expect(res.body.error.code).to.equal(code);
      if (typeof says === 'string') expect(res.body.error.message).to.include(says);
      else expect(res.body.error.message).to.match(says);
    }

    it('when PATCH /admin/accounts/:id names no account, then 404 account_not_found', async () => {
      refused(await admin('PATCH', '/admin/accounts/987654321', { plan: 'free' }), 404, 'account_not_found', 'No such account');
      refused(await admin('PATCH', '/admin/accounts/0', { plan: 'free' }), 404, 'account_not_found', 'No such account');
    });

    it('when POST /admin/accounts/:id/keys names no account, then 404 account_not_found', async () => {
      refused(await admin('POST', '/admin/accounts/987654321/keys'), 404, 'account_not_found', 'No such account');
    });

    for (const id of ['abc', '-1', '1.5', '1e3', '1234567890', '%20']) {
      it(`when the account id is "${decodeURIComponent(id)}", then PATCH and key rotation answer 400 invalid_request, and no account or key changes`, async () => {
        await t.account();
        const before = await accountsAndKeys();
        refused(await admin('PATCH', `/admin/accounts/${id}`, { plan: 'free' }), 400, 'invalid_request', 'must be a positive integer');
        refused(await admin('POST', `/admin/accounts/${id}/keys`), 400, 'invalid_request', 'must be a positive integer');
        expect(await accountsAndKeys()).to.deep.equal(before);
      });
    }

    it('when PATCH /admin/accounts/:id has a bad body, then 400 naming the field, 404 for an unknown plan, and the plan stays', async () => {
      const { accountId } = await t.account('pro');
      const path = `/admin/accounts/${accountId}`;
      refused(await admin('PATCH', path, {}), 400, 'invalid_request', /^plan: /);
      refused(await admin('PATCH', path, { plan: 'Not A Plan' }), 400, 'invalid_request', /^plan: lower-case letters/);
      refused(await admin('PATCH', path, { plan: 'free', email: 'a@b.example' }), 400, 'invalid_request', 'email');
      refused(await admin('PATCH', path, { plan: 'no-such-plan' }), 404, 'plan_not_found', 'No plan named no-such-plan');
      refused(await admin('PATCH', path, undefined, '{"plan": "free"'), 400, 'invalid_json', '');
      const plan = await t.server.db.prisma.account.findUniqueOrThrow({ where: { id: accountId }, include: { plan: true } });
      expect(plan.plan.name).to.equal('pro');
    });

    for (const [what, body, says] of [
      ['a negative grace', { grace_seconds: -1 }, /^grace_seconds: /],
      ['a grace as a string', { grace_seconds: '60' }, /^grace_seconds: /],
      ['a fractional grace', { grace_seconds: 1.5 }, /^grace_seconds: /],
      ['a grace past 2^31-1', { grace_seconds: 2 ** 31 }, /^grace_seconds: /],
      ['an unknown field', { grace: 0 }, /grace/],
      ['a check that is not true or false', { check: 'yes' }, /^check: /],
      ['an array', [], /^body: /],
    ] as const) {
      it(`when POST /admin/gc has ${what}, then 400 invalid_request naming it`, async () => {
        refused(await admin('POST', '/admin/gc', body), 400, 'invalid_request', says);
      });
    }

    it('when POST /admin/gc has a body that is not JSON, then 400 invalid_json; an empty one sweeps', async () => {
      refused(await admin('POST', '/admin/gc', undefined, 'grace_seconds=0'), 400, 'invalid_json', '');
      const swept = await admin('POST', '/admin/gc');
      expect(swept.status, swept.text).to.equal(200);
      expect(swept.body).to.include({ success: true });
    });
  });
}
