// DELETE /admin/accounts/:id and DELETE /admin/plans/:name (what
// `dropstream loadtest --setup` removes its own plan and account with):
// only what holds nothing goes, and a removed account's key stops working.
import { expect } from 'chai';
import { backends } from '../helpers/databases.js';
import { call, uploadFile } from '../helpers/client.js';
import type { TestServer } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';

for (const backend of backends) {
  describe(`admin API: deleting accounts and plans (${backend})`, () => {
    let t: TestServer;
    before(async () => {
      t = await sharedServer(backend);
    });
    const remove = (path: string) => call(`${t.server.adminUrl}${path}`, { method: 'DELETE', headers: { Authorization: `Bearer ${t.server.adminToken}` } });

    it('when the account still has a file, then 409 account_not_empty; once the file is deleted, the account goes and its key is refused', async () => {
      const plan = `del-${Date.now() % 1e9}`;
      await t.plan(plan, { api_access: true, requests_per_minute: 1000, requests_per_day: 10000, max_file_size: 1000, daily_uploads: 100 });
      const { accountId, apiKey } = await t.account(plan);
      const up = await uploadFile(t.server.url, apiKey, 'a.txt', 'hello');
      expect(up.status).to.equal(201);

      const refused = await remove(`/admin/accounts/${accountId}`);
      expect(refused.status).to.equal(409);
      expect(refused.body.error.code).to.equal('account_not_empty');
      const planRefused = await remove(`/admin/plans/${plan}`);
      expect(planRefused.status).to.equal(409);
      expect(planRefused.body.error.code).to.equal('plan_in_use');

      expect((await call(`${t.server.url}/api/v1/files/${up.body.file_id}`, { method: 'DELETE', key: apiKey })).status).to.equal(200);
      expect((await remove(`/admin/accounts/${accountId}`)).status).to.equal(200);
      expect((await call(`${t.server.url}/api/v1/stats`, { key: apiKey })).status).to.equal(401);
      expect((await remove(`/admin/accounts/${accountId}`)).body.error.code).to.equal('account_not_found');

      expect((await remove(`/admin/plans/${plan}`)).status).to.equal(200);
      const plans = (await t.admin('GET', '/admin/plans')).plans.map((p: { name: string }) => p.name);
      expect(plans).to.not.include(plan);
      expect((await remove(`/admin/plans/${plan}`)).body.error.code).to.equal('plan_not_found');
    });
  });
}
