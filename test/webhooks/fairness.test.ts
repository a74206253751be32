// Tenants share the webhook relay (issue 50): one account's webhooks at a
// receiver that never answers must not hold up another account's events.
// The flood of the issue (10 webhooks, 30 downloads of one file: 300
// messages) with the relay's own defaults; accounts taking turns when one
// account may fill every slot; a webhook whose sends keep timing out rests,
// then gets one send at a time; and the bound on a webhook's undelivered
// file.downloaded messages (downloads need no key).
import { expect } from 'chai';
import { call, uploadFile } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

const PRIVATE = { WEBHOOK_ALLOW_PRIVATE: 'true' };

async function subscribe(t: TestServer, key: string, url: string, events: string[]): Promise<string> {
  const res = await call(t.url('/api/v1/webhooks'), { method: 'POST', key, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ url, events }) });
  expect(res.status, res.text).to.equal(201);
  return res.body.webhook.webhook_id;
}

/** The account's messages not yet delivered or given up, by type. */
async function pending(t: TestServer, accountId: number): Promise<Record<string, number>> {
  const rows = await t.server.db.prisma.$queryRaw<{ type: string; n: number }[]>`
    SELECT m.type, count(*)::integer AS n FROM webhook_messages m JOIN webhook_endpoints e ON e.id = m.endpoint_id
    WHERE e.account_id = ${accountId} AND m.next_attempt_at IS NOT NULL GROUP BY m.type`;
  return Object.fromEntries(rows.map((r) => [r.type, r.n]));
}

/** Downloads the file whole through its public link (no key), and waits until the download is counted. */
async function download(t: TestServer, key: string, file: { file_id: number; public_link: string }, count: number): Promise<void> {
  const res = await fetch(t.url(file.public_link));
  expect(res.status).to.equal(200);
  await res.arrayBuffer();
  const counted = await eventually(async () => (await call(t.url(`/api/v1/files/${file.file_id}`), { key })).body.file.download_count, (n) => n >= count);
  expect(counted).to.equal(count);
}

/** Requests held by `receivers` right now. */
const hanging = (receivers: Receiver[]) => receivers.reduce((n, r) => n + r.hanging, 0);

for (const backend of backends) {
  describe(`webhook relay fairness between accounts (${backend})`, function () {
    this.timeout(120_000);
    let receivers: Receiver[] = [];
    let servers: TestServer[] = [];
    const receiver = async () => {
      const r = await startReceiver();
      receivers.push(r);
      return r;
    };
    const server = async (...args: Parameters<typeof startTestServer> extends [unknown, ...infer R] ? R : never) => {
      const t = await startTestServer(backend, ...args);
      servers.push(t);
      return t;
    };
    afterEach(async () => {
      await Promise.all(servers.map((t) => t.close()));
      await Promise.all(receivers.map((r) => r.close()));
      servers = [];
      receivers = [];
    });

    /**
     * The flood: `flooder` registers 10 webhooks for file.downloaded at
     * `silent` receivers (round robin) and downloads its own file 30 times: 300
     * messages, each held until the send's timeout.
     */
    async function flood(t: TestServer, silent: Receiver[]): Promise<{ accountId: number }> {
      const flooder = await t.account();
      for (let i = 0; i < 10; i++) await subscribe(t, flooder.apiKey, silent[i % silent.length]!.url, ['file.downloaded']);
      const file = (await uploadFile(t.server.url, flooder.apiKey, 'mine.txt', 'downloaded again and again')).body;
      for (let i = 1; i <= 30; i++) await download(t, flooder.apiKey, file, i);
      const written = await eventually(() => pending(t, flooder.accountId), (p) => p['file.downloaded'] === 300);
      expect(written).to.deep.equal({ 'file.downloaded': 300 });
      return flooder;
    }

    /** Another account's file.uploaded: resolves with how long it took to reach its receiver, at most `ms` (then it fails). */
    async function otherAccountsEvent(t: TestServer, ms: number): Promise<number> {
      const other = await t.account();
      const got = await receiver();
      await subscribe(t, other.apiKey, got.url, ['file.uploaded']);
      const started = Date.now();
      expect((await uploadFile(t.server.url, other.apiKey, 'urgent.txt', 'not held up')).status).to.equal(201);
      await eventually(async () => got.received.length, (n) => n >= 1, ms);
      const waited = Date.now() - started;
      expect(got.received.map((r) => r.event.type), `the other account's event, after ${waited} ms`).to.deep.equal(['file.uploaded']);
      return waited;
    }

    it("when one account's 10 webhooks never answer and it downloads its file 30 times (300 messages), then another account's file.uploaded arrives within 15 s", async () => {
      // The relay's defaults: a 10 s send timeout, 16 sends at once, a look every second.
      const t = await server(PRIVATE);
      const silent = await receiver();
      silent.behaviour = 'hang';
      await flood(t, [silent]);
      await eventually(async () => silent.hanging, (n) => n >= 1);
      expect(silent.hanging, 'the flood is being sent').to.be.at.least(1);
      // Oldest first over the instance, this waited for all 300 (300 / 16 x 10 s: 188 s).
      expect(await otherAccountsEvent(t, 15_000)).to.be.below(15_000);
    });

    it("when one account may fill every slot and fills them, then another account's event takes the next slot that frees", async () => {
      // No share cap (WEBHOOK_ACCOUNT_CONCURRENCY = WEBHOOK_CONCURRENCY), no rests
      // after timeouts, a 3 s timeout: only turns between accounts stand between
      // the other account and the 300.
      const t = await server({ ...PRIVATE, WEBHOOK_CONCURRENCY: '16', WEBHOOK_ACCOUNT_CONCURRENCY: '16' }, undefined, {
        webhooks: { timeoutMs: 3000, pollMs: 100, endpointTimeouts: 1_000_000 },
      });
      // A receiver per webhook, so every send in flight reaches one (an agent sends at most 4 to one host).
      const silent = await Promise.all(Array.from({ length: 10 }, () => receiver()));
      for (const r of silent) r.behaviour = 'hang';
      await flood(t, silent);
      const full = await eventually(async () => hanging(silent), (n) => n >= 16, 10_000);
      expect(full, 'every slot holds a send of the flood').to.equal(16);
      // Oldest first, this waited for the 300 (300 / 16 x 3 s: 56 s).
      expect(await otherAccountsEvent(t, 15_000)).to.be.below(15_000);
    });

    it('when sends to a webhook time out 3 times in a row, then it rests, gets one send at a time until it answers, and then its backlog flows', async () => {
      // Rests of 0.5 s (the timeout), doubling, up to WEBHOOK_MAX_BACKOFF (1 s).
      const t = await server({ ...PRIVATE, WEBHOOK_MAX_BACKOFF: '1' }, undefined, { webhooks: { timeoutMs: 500, pollMs: 50, baseBackoffMs: 100 } });
      const { apiKey } = await t.account();
      const slow = await receiver();
      slow.behaviour = 'hang';
      const id = await subscribe(t, apiKey, slow.url, ['file.uploaded']);
      for (let i = 0; i < 20; i++) await uploadFile(t.server.url, apiKey, `f${i}.txt`, `file ${i}`);
      // Four at once (4 per webhook); each of the first two timeouts frees a
      // place for one more before the third rests the webhook: at most 6 sends
      // before the rest, then probes. 10 sends cut in all.
      const cut = await eventually(async () => slow.cut.length, (n) => n >= 10, 30_000);
      expect(cut).to.be.at.least(10);
      const sends = [...slow.cut].sort((a, b) => a.startedAt - b.startedAt);
      for (let i = 6; i < sends.length; i++) {
        const [before, next] = [sends[i - 1]!, sends[i]!];
        // One at a time, and each after a rest: not the next due message the moment a send is cut.
        expect(next.startedAt - before.at, `send ${i + 1} began ${next.startedAt - before.at} ms after send ${i} was cut`).to.be.at.least(400);
      }
      const shown = (await call(t.url('/api/v1/webhooks'), { key: apiKey })).body.webhooks[0];
      expect(shown.webhook_id).to.equal(id);
      expect(shown.paused_until, 'the list shows the rest').to.be.a('string');
      slow.behaviour = 'ok';
      const delivered = await eventually(async () => new Set(slow.received.map((r) => r.id)).size, (n) => n >= 20, 20_000);
      expect(delivered).to.equal(20);
      const after = await eventually(async () => (await call(t.url('/api/v1/webhooks'), { key: apiKey })).body.webhooks[0], (w) => w.paused_until === null);
      expect(after.paused_until, 'an answer ends the rest').to.equal(null);
    });

    it('when a webhook holds WEBHOOK_PENDING_DOWNLOADS undelivered file.downloaded, then a download of the same file replaces its message, another file\'s is dropped and counted, and uploads are still written', async () => {
      const t = await server({ ...PRIVATE, WEBHOOK_MAX_BACKOFF: '1', WEBHOOK_PENDING_DOWNLOADS: '3' }, undefined, { webhooks: { pollMs: 50, baseBackoffMs: 100 } });
      const { accountId, apiKey } = await t.account();
      const down = await receiver();
      await down.down();
      await subscribe(t, apiKey, down.url, ['file.uploaded', 'file.downloaded']);
      const files = [];
      for (let i = 0; i < 4; i++) files.push((await uploadFile(t.server.url, apiKey, `f${i}.txt`, `file ${i}`)).body);
      for (const file of files.slice(0, 3)) await download(t, apiKey, file, 1);
      expect(await pending(t, accountId)).to.deep.equal({ 'file.uploaded': 4, 'file.downloaded': 3 });
      // At the bound: a file with none undelivered gets none (dropped, counted) ...
      await download(t, apiKey, files[3]!, 1);
      // ... and one with an undelivered message gets the newer one in its place.
      await download(t, apiKey, files[0]!, 2);
      expect(await pending(t, accountId)).to.deep.equal({ 'file.uploaded': 4, 'file.downloaded': 3 });
      const dropped = (await t.server.metrics.webhookEventsDropped.get()).values.find((v) => v.labels.type === 'file.downloaded')?.value;
      expect(dropped, 'dropstream_webhook_events_dropped_total{type="file.downloaded"}').to.equal(1);
      // Facts are never dropped: an upload at the bound is written.
      files.push((await uploadFile(t.server.url, apiKey, 'f4.txt', 'file 4')).body);
      expect(await pending(t, accountId)).to.deep.equal({ 'file.uploaded': 5, 'file.downloaded': 3 });
      await down.up();
      await eventually(async () => down.received.length, (n) => n >= 8, 15_000);
      await eventually(() => pending(t, accountId), (p) => Object.keys(p).length === 0);
      const downloads = down.received.filter((r) => r.event.type === 'file.downloaded').map((r) => [r.event.data.file_id, r.event.data.download_count]);
      expect(downloads.sort()).to.deep.equal([[files[0]!.file_id, 2], [files[1]!.file_id, 1], [files[2]!.file_id, 1]].sort());
      expect(down.received.filter((r) => r.event.type === 'file.uploaded')).to.have.length(5);
    });
  });
}
