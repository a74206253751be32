// The webhooks API (issue 44) as a client sees it: create (secret shown
// once), list, delete, rotate the secret, deliveries; bad bodies answered
// with invalid_webhook, the per-account cap, and another account's webhook
// answered as not found.
import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { buildTestServer, type BuiltTestServer } from '../helpers/built-server.js';
import { MAX_WEBHOOKS_PER_ACCOUNT } from '../../src/webhooks/endpoints.js';
import { EVENT_TYPES } from '../../src/webhooks/events.js';

const json = (body: unknown) => ({ method: 'POST', headers: { 'Content-Type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
const SPEC_DATE = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;

for (const backend of backends) {
  describe(`webhooks API (${backend})`, function () {
    this.timeout(60_000);
    let t: BuiltTestServer;
    let key: string;
    const hooks = (path = '') => t.url(`/api/v1/webhooks${path}`);
    const create = (body: unknown, apiKey = key) => call(hooks(), { ...json(body), key: apiKey });

    before(async () => {
      t = await buildTestServer(backend);
    });
    after(() => t?.close());
    beforeEach(async () => {
      ({ apiKey: key } = await t.account());
    });

    it('when a webhook is created without events, then it answers 201 with every event type and a whsec_ secret shown once', async () => {
      const res = await create({ url: 'https://example.com/hook' });
      expect(res.status).to.equal(201);
      const { webhook } = res.body;
      expect(webhook.webhook_id).to.match(/^wh_[A-Za-z0-9_-]{16}$/);
      expect(webhook.url).to.equal('https://example.com/hook');
      expect(webhook.events).to.deep.equal([...EVENT_TYPES]);
      expect(webhook.created_at).to.match(SPEC_DATE);
      expect(webhook.disabled).to.equal(false);
      expect(Buffer.from(webhook.secret.slice('whsec_'.length), 'base64')).to.have.length(32);
      const listed = await call(hooks(), { key });
      expect(listed.status).to.equal(200);
      expect(listed.body.webhooks).to.have.length(1);
      expect(listed.body.webhooks[0].webhook_id).to.equal(webhook.webhook_id);
      expect(listed.body.webhooks[0]).not.to.have.property('secret');
      expect(listed.text).not.to.include(webhook.secret);
    });

    it('when events are named, then only those are kept (duplicates once)', async () => {
      const res = await create({ url: 'http://example.com/a', events: ['file.deleted', 'file.uploaded', 'file.deleted'] });
      expect(res.status).to.equal(201);
      expect(res.body.webhook.events).to.deep.equal(['file.deleted', 'file.uploaded']);
    });

    for (const [name, body] of [
      ['a URL of another scheme', { url: 'ftp://example.com/x' }],
      ['no URL', { events: ['file.uploaded'] }],
      ['a URL that is not one', { url: 'not a url' }],
      ['an unknown event', { url: 'https://example.com', events: ['file.exploded'] }],
      ['an empty event list', { url: 'https://example.com', events: [] }],
      ['an unknown field', { url: 'https://example.com', secret: 'mine' }],
      ['a JSON array', [{ url: 'https://example.com' }]],
      ['a body that is not JSON', '{"url": '],
    ] as const) {
      it(`when the body has ${name}, then 400 invalid_webhook and nothing is created`, async () => {
        const res = await create(body);
        expect(res.status).to.equal(400);
        expect(res.body.error.code).to.equal('invalid_webhook');
        expect((await call(hooks(), { key })).body.webhooks).to.have.length(0);
      });
    }

    it(`when the account has ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks, then another is refused with 403 webhook_limit`, async () => {
      const made = await Promise.all(Array.from({ length: MAX_WEBHOOKS_PER_ACCOUNT + 3 }, (_, i) => create({ url: `https://example.com/${i}` })));
      expect(made.filter((r) => r.status === 201)).to.have.length(MAX_WEBHOOKS_PER_ACCOUNT);
      const refused = made.filter((r) => r.status !== 201);
      expect(refused).to.have.length(3);
      for (const r of refused) expect([r.status, r.body.error.code]).to.deep.equal([403, 'webhook_limit']);
      expect((await call(hooks(), { key })).body.webhooks).to.have.length(MAX_WEBHOOKS_PER_ACCOUNT);
    });

    it('when a webhook is deleted, then it is gone from the list and a second delete is 404', async () => {
      const id = (await create({ url: 'https://example.com' })).body.webhook.webhook_id;
      const res = await call(hooks(`/${id}`), { method: 'DELETE', key });
      expect(res.status).to.equal(200);
      expect((await call(hooks(), { key })).body.webhooks).to.have.length(0);
      const again = await call(hooks(`/${id}`), { method: 'DELETE', key });
      expect([again.status, again.body.error.code]).to.deep.equal([404, 'webhook_not_found']);
    });

    it('when the secret is rotated, then a new whsec_ secret is answered and the webhook keeps its id', async () => {
      const { webhook } = (await create({ url: 'https://example.com' })).body;
      const res = await call(hooks(`/${webhook.webhook_id}/rotate-secret`), { method: 'POST', key });
      expect(res.status).to.equal(200);
      expect(res.body.webhook.webhook_id).to.equal(webhook.webhook_id);
      expect(res.body.webhook.secret).to.match(/^whsec_/).and.not.equal(webhook.secret);
    });

    it("when another account names a webhook, then delete, rotate-secret and deliveries answer 404 and change nothing", async () => {
      const id = (await create({ url: 'https://example.com' })).body.webhook.webhook_id;
      const { apiKey: other } = await t.account();
      for (const [method, path] of [['DELETE', `/${id}`], ['POST', `/${id}/rotate-secret`], ['GET', `/${id}/deliveries`]]) {
        const res = await call(hooks(path), { method, key: other });
        expect([res.status, res.body.error.code], `${method} ${path}`).to.deep.equal([404, 'webhook_not_found']);
      }
      expect((await call(hooks(), { key })).body.webhooks.map((w: { webhook_id: string }) => w.webhook_id)).to.deep.equal([id]);
      expect((await call(hooks(), { key: other })).body.webhooks).to.have.length(0);
    });

    it('when deliveries are asked for a new webhook, then the list is empty', async () => {
      const id = (await create({ url: 'https://example.com' })).body.webhook.webhook_id;
      const res = await call(hooks(`/${id}/deliveries`), { key });
      expect(res.status).to.equal(200);
      expect(res.body.deliveries).to.deep.equal([]);
    });

    it('when no API key is sent, then the webhook routes answer 401', async () => {
      expect((await call(hooks())).status).to.equal(401);
      expect((await call(hooks(), json({ url: 'https://example.com' }))).status).to.equal(401);
    });
  });
}
