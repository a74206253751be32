// The other webhook events (issue 44): file.downloaded when a complete body
// is counted (as download_count counts), link.exhausted when a link reaches
// its max_downloads, file.deleted when the sweep removes an expired file,
// and upload.expired when the sweep removes an unfinished
// tus upload (not when its client terminates it).
import { expect } from 'chai';
import { call, upload } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { create, patch, terminate, uploadUrl } from '../helpers/tus.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

const FAST = { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_MAX_BACKOFF: '1' };

for (const backend of backends) {
  describe(`webhook events: downloads, exhausted links, expired uploads (${backend})`, function () {
    this.timeout(60_000);
    let t: TestServer;
    let key: string;
    let receiver: Receiver;
    let webhookId: string;
    const types = () => receiver.received.map((r) => r.event.type);
    /**
     * The outbox once every message in it was delivered: a message is written in
     * the statement of its fact, so this is all that was sent, and a send is a
     * claim that counts an attempt, so one attempt each means nothing went twice.
     */
    const delivered = async (count: number) => {
      const read = async () => (await call(t.url(`/api/v1/webhooks/${webhookId}/deliveries`), { key })).body.deliveries as { type: string; status: string; attempts: number }[];
      const shown = await eventually(read, (d) => d.length >= count && d.every((m) => m.status === 'delivered'), 10_000);
      expect(shown.map((m) => m.attempts), 'attempts per message').to.deep.equal(Array(shown.length).fill(1));
      expect(types().sort(), 'what the receiver got').to.deep.equal(shown.map((m) => m.type).sort());
      return shown.map((m) => m.type).sort();
    };

    before(async () => {
      t = await startTestServer(backend, FAST, undefined, { webhooks: { pollMs: 50, baseBackoffMs: 100 } });
    });
    after(() => t?.close());
    beforeEach(async () => {
      ({ apiKey: key } = await t.account());
      receiver = await startReceiver();
      const res = await call(t.url('/api/v1/webhooks'), {
        method: 'POST',
        key,
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ url: receiver.url, events: ['file.downloaded', 'link.exhausted', 'upload.expired', 'file.deleted'] }),
      });
      receiver.secrets = [res.body.webhook.secret];
      webhookId = res.body.webhook.webhook_id;
    });
    afterEach(() => receiver.close());

    it('when a file is downloaded whole, then file.downloaded arrives with the new download_count; a range does not count', async () => {
      const file = (await upload(t.server.url, key, [{ name: 'file', filename: 'd.txt', content: 'downloaded bytes' }])).body;
      const ranged = await fetch(t.url(file.public_link), { headers: { Range: 'bytes=0-3' } });
      expect(ranged.status).to.equal(206);
      await ranged.arrayBuffer();
      const whole = await fetch(t.url(file.public_link));
      expect(await whole.text()).to.equal('downloaded bytes');
      expect(await delivered(1)).to.deep.equal(['file.downloaded']);
      expect(receiver.received[0]!.event.data).to.include({ file_id: file.file_id, download_count: 1 });
      expect(receiver.received[0]!.verified).to.deep.equal([true]);
    });

    it('when a link reaches its max_downloads, then link.exhausted arrives once, after the last counted download', async () => {
      const file = (await upload(t.server.url, key, [{ name: 'max_downloads', content: '2' }, { name: 'file', filename: 'm.txt', content: 'twice' }])).body;
      for (let i = 0; i < 2; i++) expect(await (await fetch(t.url(file.public_link))).text()).to.equal('twice');
      expect((await fetch(t.url(file.public_link))).status).to.equal(410);
      expect(await delivered(3)).to.deep.equal(['file.downloaded', 'file.downloaded', 'link.exhausted']);
      const exhausted = receiver.received.find((r) => r.event.type === 'link.exhausted')!;
      expect(exhausted.event.data).to.include({ max_downloads: 2, download_count: 2 });
      expect(exhausted.event.data.link_id).to.be.a('string');
      expect(exhausted.event.data.file).to.include({ file_id: file.file_id, download_count: 2 });
      expect(exhausted.verified).to.deep.equal([true]);
    });

    it('when the sweep removes a file at its expires_at, then file.deleted arrives for it', async () => {
      const file = (await upload(t.server.url, key, [{ name: 'expires_in', content: '3600' }, { name: 'file', filename: 'e.txt', content: 'expiring' }])).body;
      await t.server.db.prisma.file.updateMany({ where: { id: file.file_id }, data: { expiresAt: new Date(Date.now() - 1000) } });
      await t.admin('POST', '/admin/gc', { grace_seconds: 0 });
      await eventually(async () => receiver.received.length, (n) => n >= 1);
      expect(receiver.received.map((r) => [r.event.type, r.event.data.file_id, r.verified[0]])).to.deep.equal([['file.deleted', file.file_id, true]]);
    });

    it('when the sweep removes an unfinished tus upload, then upload.expired arrives; a terminated one sends nothing', async () => {
      const kept = await create(t.server.url, key, { length: 10, filename: 'never.bin' });
      await patch(uploadUrl(t.server.url, kept), key, 0, Buffer.from('abcd'));
      const ended = await create(t.server.url, key, { length: 10, filename: 'ended.bin' });
      expect((await terminate(uploadUrl(t.server.url, ended), key)).status).to.equal(204);
      await t.server.db.prisma.resumableUpload.updateMany({ data: { expiresAt: new Date(Date.now() - 1000) } });
      await t.admin('POST', '/admin/gc', { grace_seconds: 0 });
      expect(await delivered(1)).to.deep.equal(['upload.expired']);
      const id = kept.headers.get('location')!.split('/').pop();
      expect(receiver.received[0]!.event.data).to.include({ upload_id: id, filename: 'never.bin', length: 10, offset: 4 });
      expect(receiver.received[0]!.verified).to.deep.equal([true]);
    });
  });
}
