// The outbox is trimmed (src/webhooks/relay.ts, prune): every upload,
// download and deletion writes a message per endpoint, so settled ones
// (delivered or given up) go once older than the deliveries view keeps them;
// one still due is kept however old.
import { expect } from 'chai';
import pino from 'pino';
import { call } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { Relay } from '../../src/webhooks/relay.js';

const DAY = 86_400_000;

for (const backend of backends) {
  describe(`webhook outbox retention (${backend})`, function () {
    this.timeout(60_000);
    let t: TestServer;
    before(async () => {
      t = await startTestServer(backend, { WEBHOOK_ALLOW_PRIVATE: 'true' });
    });
    after(() => t?.close());

    it('when settled messages are older than 30 days, then prune deletes them and keeps recent ones and any still due', async () => {
      const { apiKey: key } = await t.account();
      const made = await call(t.url('/api/v1/webhooks'), {
        method: 'POST',
        key,
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ url: 'http://127.0.0.1:1/hook' }),
      });
      expect(made.status, made.text).to.equal(201);
      const endpoint = made.body.webhook.webhook_id as string;
      const { prisma } = t.server.db;
      const now = new Date();
      const at = (days: number) => new Date(now.getTime() - days * DAY);
      const rows = [
        { id: 'msg_old_delivered', created: at(40), next: null, delivered: at(40) },
        { id: 'msg_old_given_up', created: at(31), next: null, delivered: null },
        { id: 'msg_recent_delivered', created: at(29), next: null, delivered: at(29) },
        { id: 'msg_old_still_due', created: at(40), next: new Date(now.getTime() + DAY), delivered: null },
      ];
      for (const r of rows) {
        await prisma.$executeRaw`INSERT INTO webhook_messages (id, endpoint_id, type, body, next_attempt_at, delivered_at, created_at)
          VALUES (${r.id}, ${endpoint}, 'file.uploaded', '{}', ${r.next}::timestamp(3), ${r.delivered}::timestamp(3), ${r.created}::timestamp(3))`;
      }
      const relay = new Relay({ prisma, logger: pino({ level: 'silent' }), allowPrivate: true, maxBackoffMs: 1000, retryWindowMs: 1000 });
      expect(await relay.prune(now)).to.equal(2);
      const left = await prisma.$queryRaw<{ id: string }[]>`SELECT id FROM webhook_messages WHERE endpoint_id = ${endpoint} ORDER BY id`;
      expect(left.map((r) => r.id)).to.deep.equal(['msg_old_still_due', 'msg_recent_delivered']);
      await relay.close();
    });
  });
}
