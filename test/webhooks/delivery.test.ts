// Webhook deliveries (issue 44) to real receivers over HTTP, every signature
// verified with `standardwebhooks`: file.uploaded (plain and tus) and
// file.deleted; a receiver down then back; a server restarted with messages
// pending; a hanging receiver cut at the timeout and tried again; a private
// address refused without WEBHOOK_ALLOW_PRIVATE; both signatures during a
// secret's rotation; and an endpoint disabled when its window runs out.
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { call, uploadFile } from '../helpers/client.js';
import { captureLog } from '../helpers/log-capture.js';
import { backends, createTestDatabase, type Backend } from '../helpers/databases.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestServer, startTwoInstances, type TestServer } from '../helpers/server.js';
import { create, patch, uploadUrl } from '../helpers/tus.js';
import { startReceiver, type Gauge, type Receiver } from '../helpers/webhook-receiver.js';
import { RELAY_DEFAULTS } from '../../src/webhooks/relay.js';

/** Short timers: tries a second apart at most, a look for due messages every 50 ms. */
const FAST = { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_MAX_BACKOFF: '1' };
/** Timeout 1 s instead of 10 s, so the hanging receiver's test waits a second. */
const FAST_RELAY = { webhooks: { pollMs: 50, baseBackoffMs: 100, timeoutMs: 1000 } };

async function subscribe(t: TestServer, key: string, receiver: Receiver, events?: string[]): Promise<string> {
  const res = await call(t.url('/api/v1/webhooks'), {
    method: 'POST',
    key,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ url: receiver.url, ...(events ? { events } : {}) }),
  });
  expect(res.status).to.equal(201);
  receiver.secrets = [res.body.webhook.secret];
  return res.body.webhook.webhook_id;
}

/** dropstream_webhook_deliveries_total of `t`, by outcome. */
async function outcomes(t: TestServer): Promise<Record<string, number>> {
  const metric = await t.server.metrics.webhookDeliveries.get();
  return Object.fromEntries(metric.values.map((v) => [String(v.labels.outcome), v.value]));
}

const deliveries = async (t: TestServer, key: string, id: string) => (await call(t.url(`/api/v1/webhooks/${id}/deliveries`), { key })).body.deliveries;

/**
 * Runs `run` with FAST settings whose data folder and (on PostgreSQL)
 * database outlive one server, so the test can stop it and start another on
 * the same data; removes both afterwards.
 */
async function restartable(backend: Backend, run: (env: Record<string, string>) => Promise<void>): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'dropstream-webhooks-'));
  const database = backend === 'postgresql' ? await createTestDatabase() : undefined;
  try {
    await run({ ...FAST, DATA_DIR: dataDir, ...(database ? { DATABASE_URL: database.url } : {}) });
  } finally {
    await database?.drop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

for (const backend of backends) {
  describe(`webhook deliveries (${backend})`, function () {
    this.timeout(90_000);
    let t: TestServer;
    let key: string;
    let receiver: Receiver;

    before(async () => {
      t = await startTestServer(backend, FAST, undefined, FAST_RELAY);
    });
    after(() => t?.close());
    beforeEach(async () => {
      ({ apiKey: key } = await t.account());
      receiver = await startReceiver();
    });
    afterEach(() => receiver.close());

    it('when a file is uploaded, then the receiver gets one signed file.uploaded with the file as the API shows it', async () => {
      const id = await subscribe(t, key, receiver);
      const upload = (await uploadFile(t.server.url, key, 'hello.txt', 'hello webhooks')).body;
      await eventually(async () => receiver.received.length, (n) => n >= 1);
      expect(receiver.received).to.have.length(1);
      const [got] = receiver.received;
      expect(got!.verified).to.deep.equal([true]);
      expect(got!.id).to.match(/^msg_[0-9a-f]{32}$/);
      expect(got!.event.type).to.equal('file.uploaded');
      expect(new Date(got!.event.timestamp).toISOString()).to.equal(got!.event.timestamp);
      expect(got!.event.data).to.include({ file_id: upload.file_id, filename: 'hello.txt', size: 14, download_count: 0, expires_at: null });
      expect(got!.event.data.sha256).to.equal(createHash('sha256').update('hello webhooks').digest('hex'));
      const [delivery] = await eventually(() => deliveries(t, key, id), (d) => d[0]?.status === 'delivered');
      expect(delivery).to.include({ message_id: got!.id, type: 'file.uploaded', status: 'delivered', attempts: 1, last_status: 204, next_attempt_at: null });
      expect((await outcomes(t)).delivered).to.be.at.least(1);
    });

    it('when a resumable (tus) upload finishes, then file.uploaded is delivered, signed', async () => {
      await subscribe(t, key, receiver, ['file.uploaded']);
      const body = Buffer.from('resumable bytes');
      const created = await create(t.server.url, key, { length: body.length, filename: 'tus.bin' });
      expect(created.status).to.equal(201);
      await patch(uploadUrl(t.server.url, created), key, 0, body.subarray(0, 5));
      expect(receiver.received).to.have.length(0);
      const done = await patch(uploadUrl(t.server.url, created), key, 5, body.subarray(5));
      expect(done.status).to.equal(204);
      await eventually(async () => receiver.received.length, (n) => n >= 1);
      expect(receiver.received.map((r) => [r.event.type, r.event.data.filename, r.event.data.size, r.verified[0]])).to.deep.equal([['file.uploaded', 'tus.bin', body.length, true]]);
    });

    it('when a file is deleted, then file.deleted is delivered for it, and only to webhooks that asked', async () => {
      const other = await startReceiver();
      try {
        await subscribe(t, key, receiver, ['file.deleted']);
        await subscribe(t, key, other, ['file.uploaded']);
        const file = (await uploadFile(t.server.url, key, 'bye.txt', 'soon gone')).body;
        expect((await call(t.url(`/api/v1/files/${file.file_id}`), { method: 'DELETE', key })).status).to.equal(200);
        await eventually(async () => receiver.received.length + other.received.length, (n) => n >= 2);
        expect(receiver.received.map((r) => [r.event.type, r.event.data.file_id, r.verified[0]])).to.deep.equal([['file.deleted', file.file_id, true]]);
        expect(other.received.map((r) => r.event.type)).to.deep.equal(['file.uploaded']);
      } finally {
        await other.close();
      }
    });

    it('when the receiver is down (connection refused) during 10 uploads and comes back, then all 10 arrive, one webhook-id each', async () => {
      const id = await subscribe(t, key, receiver);
      await receiver.down();
      const files = await Promise.all(Array.from({ length: 10 }, (_, i) => uploadFile(t.server.url, key, `down-${i}.txt`, `content ${i}`)));
      // Tried and failed while down: the deliveries show it.
      const failing = await eventually(() => deliveries(t, key, id), (d) => d.length === 10 && d.every((x: any) => x.attempts >= 2));
      expect(failing.every((x: any) => x.status === 'pending' && x.last_status === null && x.last_error)).to.equal(true);
      await receiver.up();
      await eventually(async () => new Set(receiver.received.map((r) => r.id)).size, (n) => n >= 10, 15_000);
      const ids = new Set(receiver.received.map((r) => r.id));
      expect(ids.size).to.equal(10);
      expect(receiver.received.every((r) => r.verified[0])).to.equal(true);
      expect(new Set(receiver.received.map((r) => r.event.data.file_id))).to.deep.equal(new Set(files.map((f) => f.body.file_id)));
      // Each event kept its one id over every try: the ids delivered are the ids listed.
      const listed = await eventually(() => deliveries(t, key, id), (d) => d.every((x: any) => x.status === 'delivered'));
      expect(new Set(listed.map((x: any) => x.message_id))).to.deep.equal(ids);
    });

    it('when the receiver hangs, then the send is cut at the timeout and tried again with the same webhook-id', async () => {
      await subscribe(t, key, receiver);
      receiver.behaviour = (n) => (n === 1 ? 'hang' : 'ok');
      await uploadFile(t.server.url, key, 'slow.txt', 'slow receiver');
      await eventually(async () => receiver.received.length, (n) => n >= 1, 15_000);
      expect(receiver.cut).to.have.length(1);
      const waited = receiver.cut[0]!.at - receiver.cut[0]!.startedAt;
      // The test server's timeout is 1 s (FAST_RELAY): cut then, not left hanging.
      expect(waited).to.be.within(900, 5000);
      expect(receiver.received[0]!.id).to.equal(receiver.cut[0]!.id);
      expect(receiver.received[0]!.verified[0]).to.equal(true);
    });

    it('when a receiver answers with a redirect, then it is not followed and the delivery counts as failed', async () => {
      const target = await startReceiver();
      try {
        const id = await subscribe(t, key, receiver);
        receiver.answer = (res) => res.writeHead(307, { Location: target.url }).end();
        await uploadFile(t.server.url, key, 'redirected.txt', 'moved');
        const [delivery] = await eventually(() => deliveries(t, key, id), (d) => d[0]?.attempts >= 2);
        expect(delivery).to.include({ status: 'pending', last_status: 307 });
        expect(target.received).to.have.length(0);
      } finally {
        await target.close();
      }
    });

    it(`when events pile up for slow receivers, then at most ${RELAY_DEFAULTS.perEndpoint} sends run per webhook and ${RELAY_DEFAULTS.concurrency} in all`, async () => {
      // A 10 s send timeout: a send cut at 1 s on a loaded machine frees its place while the
      // receiver still counts it, and the caps are what this test is about (a local run saw 19 of 16).
      const patient = await startTestServer(backend, FAST, undefined, { webhooks: { ...FAST_RELAY.webhooks, timeoutMs: 10_000 } });
      const { apiKey: key } = await patient.account();
      const gauge: Gauge = { now: 0, max: 0 };
      const slow = await Promise.all(Array.from({ length: 5 }, () => startReceiver(0, gauge)));
      const storm = (from: number) => Promise.all(Array.from({ length: 20 }, (_, i) => uploadFile(patient.server.url, key, `storm-${from + i}.txt`, `storm ${from + i}`)));
      const delivered = async () => slow.reduce((n, r) => n + new Set(r.received.map((x) => x.id)).size, 0);
      try {
        for (const r of slow) r.delayMs = 150;
        // One webhook alone with 20 due messages: the instance could send 16 at once, but not to one webhook.
        await subscribe(patient, key, slow[0]!, ['file.uploaded']);
        await storm(0);
        await eventually(delivered, (n) => n >= 20, 30_000);
        expect(slow[0]!.maxConcurrent).to.be.within(2, RELAY_DEFAULTS.perEndpoint);
        // Five webhooks with 20 each: more than the instance's cap could go at once.
        for (const r of slow.slice(1)) await subscribe(patient, key, r, ['file.uploaded']);
        await storm(20);
        await eventually(delivered, (n) => n >= 120, 30_000);
        expect(slow.map((r) => new Set(r.received.map((x) => x.id)).size)).to.deep.equal([40, 20, 20, 20, 20]);
        for (const r of slow) expect(r.maxConcurrent).to.be.within(1, RELAY_DEFAULTS.perEndpoint);
        expect(gauge.max).to.be.within(RELAY_DEFAULTS.perEndpoint + 1, RELAY_DEFAULTS.concurrency);
      } finally {
        await Promise.all(slow.map((r) => r.close()));
        await patient.close();
      }
    });

    it('when a receiver answers with an endless body, then the relay reads a few KiB, hangs up and records the status', async () => {
      // A 10 s timeout here: only reading the answer at most a few KiB ends the try sooner.
      const patient = await startTestServer(backend, FAST, undefined, { webhooks: { ...FAST_RELAY.webhooks, timeoutMs: 10_000 } });
      try {
        const { apiKey } = await patient.account();
        const id = await subscribe(patient, apiKey, receiver);
        const closed: number[] = [];
        receiver.answer = (res) => {
          const started = Date.now();
          res.writeHead(500, { 'Content-Type': 'text/plain' });
          const chunk = Buffer.alloc(64 * 1024, 'x');
          const timer = setInterval(() => res.write(chunk), 5);
          res.on('close', () => {
            clearInterval(timer);
            closed.push(Date.now() - started);
          });
        };
        await uploadFile(patient.server.url, apiKey, 'endless.txt', 'endless');
        const [delivery] = await eventually(() => deliveries(patient, apiKey, id), (d) => d[0]?.last_status === 500, 15_000);
        expect(delivery.last_status).to.equal(500);
        expect(delivery.last_error.length).to.be.below(300);
        expect(closed[0]).to.be.below(5000);
      } finally {
        await patient.close();
      }
    });

    it("when one webhook has a backlog of 400 due messages, then another webhook's event is not held behind it", async () => {
      const busy = await startReceiver();
      try {
        busy.delayMs = 150;
        const busyId = await subscribe(t, key, busy, ['file.deleted']);
        await subscribe(t, key, receiver, ['file.uploaded']);
        // The backlog, written straight into the outbox: 400 messages due now.
        const now = new Date();
        await t.server.db.prisma.webhookMessage.createMany({
          data: Array.from({ length: 400 }, (_, i) => ({ id: `msg_${String(i).padStart(32, '0')}${busyId.slice(3, 8)}`, endpointId: busyId, type: 'file.deleted', body: '{}', nextAttemptAt: now, createdAt: now })),
        });
        await eventually(async () => busy.maxConcurrent, (n) => n >= 1);
        await uploadFile(t.server.url, key, 'not-held.txt', 'not held');
        await eventually(async () => receiver.received.length, (n) => n >= 1, 20_000);
        // Sent with the backlog's first few, not after the 300 a look ordered by time alone would put first.
        expect(busy.received.length).to.be.below(100);
        await call(t.url(`/api/v1/webhooks/${busyId}`), { method: 'DELETE', key });
      } finally {
        await busy.close();
      }
    });

    it('when the secret is rotated, then deliveries carry two signatures and both the old and the new secret verify', async () => {
      const id = await subscribe(t, key, receiver);
      const old = receiver.secrets[0]!;
      const rotated = await call(t.url(`/api/v1/webhooks/${id}/rotate-secret`), { method: 'POST', key });
      receiver.secrets = [old, rotated.body.webhook.secret];
      await uploadFile(t.server.url, key, 'rotated.txt', 'after rotation');
      await eventually(async () => receiver.received.length, (n) => n >= 1);
      const [got] = receiver.received;
      expect(got!.signature.split(' ')).to.have.length(2);
      expect(got!.verified).to.deep.equal([true, true]);
    });

    it('when deliveries fail for the whole retry window, then the webhook is disabled and shows so in the list', async function () {
      // A 10 s send timeout: the failing receiver answers 500 at once, and a send cut by a loaded machine's delay would record no status.
      // A 4 s retry window, both uploads at once: on a loaded machine a second upload 1.5 s after the
      // first found the webhook already disabled by the first's give-up, and wrote nothing to show.
      const quick = await startTestServer(backend, FAST, undefined, { webhooks: { ...FAST_RELAY.webhooks, retryWindowMs: 4000, timeoutMs: 10_000 } });
      try {
        const { apiKey } = await quick.account();
        receiver.behaviour = 'fail';
        const id = await subscribe(quick, apiKey, receiver);
        await Promise.all([uploadFile(quick.server.url, apiKey, 'x.txt', 'x'), uploadFile(quick.server.url, apiKey, 'y.txt', 'y')]);
        const list = await eventually(async () => (await call(quick.url('/api/v1/webhooks'), { key: apiKey })).body.webhooks, (w) => w[0]?.disabled === true, 20_000);
        expect(list[0]).to.include({ webhook_id: id, disabled: true });
        const shown = await deliveries(quick, apiKey, id);
        expect(shown.map((d: any) => d.status)).to.deep.equal(['failed', 'failed']);
        expect(shown.some((d: any) => d.last_status === 500)).to.equal(true);
        const counted = await outcomes(quick);
        // One gives up and disables the webhook, which stops the other (or both ran out on their own).
        expect(counted.given_up).to.be.within(1, 2);
        expect(counted.failed).to.be.at.least(2);
        expect(counted.delivered ?? 0).to.equal(0);
        // A disabled webhook is not written to: the upload's answer comes after its
        // statement, so the outbox holds all it ever will for z.txt (nothing).
        await uploadFile(quick.server.url, apiKey, 'z.txt', 'z');
        expect(await deliveries(quick, apiKey, id)).to.have.length(2);
      } finally {
        await quick.close();
      }
    });
  });

  describe(`webhook safety and restarts (${backend})`, function () {
    this.timeout(90_000);

    it('when WEBHOOK_ALLOW_PRIVATE is off, then a loopback receiver gets nothing, by address or by name, and the delivery says why without the address (issue 50)', async () => {
      const receiver = await startReceiver();
      const log = captureLog('debug');
      const t = await startTestServer(backend, { WEBHOOK_MAX_BACKOFF: '1' }, log.logger, FAST_RELAY);
      try {
        const { apiKey } = await t.account();
        const byAddress = await subscribe(t, apiKey, receiver);
        // localhost: a name the system resolver answers with 127.0.0.1 or ::1, as an internal name would be.
        const byName = await subscribe(t, apiKey, { ...receiver, url: receiver.url.replace('127.0.0.1', 'localhost') });
        await uploadFile(t.server.url, apiKey, 'inside.txt', 'inside');
        for (const id of [byAddress, byName]) {
          const [delivery] = await eventually(() => deliveries(t, apiKey, id), (d) => d[0]?.attempts >= 2);
          expect(delivery.status).to.equal('pending');
          // What the account reads: the refusal alone, never what its URL resolved to.
          expect(delivery.last_error).to.equal('destination is not a public address');
        }
        expect(receiver.received).to.have.length(0);
        // The operator's log keeps the detail.
        const failed = log.lines.filter((l) => l.msg === 'webhook delivery failed').map((l) => String(l.detail));
        expect(failed.some((d) => /^(127\.0\.0\.1|::1) \(host localhost\)$/.test(d)), failed.join(', ')).to.equal(true);
        expect(failed.some((d) => d === '127.0.0.1 (host 127.0.0.1)'), failed.join(', ')).to.equal(true);
      } finally {
        await t.close();
        await receiver.close();
      }
    });

    it('when the server shuts down during a send to a hanging receiver, then close() does not wait out the timeout and the next start sends it again', async () => {
      const receiver = await startReceiver();
      try {
        await restartable(backend, async (env) => {
          const patient = { webhooks: { ...FAST_RELAY.webhooks, timeoutMs: 20_000 } };
          let t = await startTestServer(backend, env, undefined, patient);
          const { apiKey } = await t.account();
          const id = await subscribe(t, apiKey, receiver);
          receiver.behaviour = (n) => (n === 1 ? 'hang' : 'ok');
          await uploadFile(t.server.url, apiKey, 'in-flight.txt', 'in flight');
          await eventually(async () => receiver.hanging, (n) => n >= 1);
          const started = Date.now();
          await t.close();
          expect(Date.now() - started).to.be.below(10_000);
          await eventually(async () => receiver.cut.length, (n) => n >= 1);
          t = await startTestServer(backend, env, undefined, patient);
          try {
            await eventually(async () => receiver.received.length, (n) => n >= 1, 10_000);
            expect(receiver.received.map((r) => [r.id, r.verified[0]])).to.deep.equal([[receiver.cut[0]!.id, true]]);
            // The cut try was handed back, not counted against the message.
            const [delivery] = await eventually(() => deliveries(t, apiKey, id), (d) => d[0]?.status === 'delivered');
            expect(delivery.attempts).to.equal(1);
          } finally {
            await t.close();
          }
        });
      } finally {
        await receiver.close();
      }
    });

    it('when the server restarts with messages pending, then nothing is lost', async () => {
      const receiver = await startReceiver();
      try {
        await restartable(backend, async (env) => {
          let t = await startTestServer(backend, env, undefined, FAST_RELAY);
          const { apiKey } = await t.account();
          await subscribe(t, apiKey, receiver);
          await receiver.down();
          for (let i = 0; i < 3; i++) await uploadFile(t.server.url, apiKey, `r${i}.txt`, `restart ${i}`);
          await t.close();
          await receiver.up();
          t = await startTestServer(backend, env, undefined, FAST_RELAY);
          try {
            await eventually(async () => new Set(receiver.received.map((r) => r.id)).size, (n) => n >= 3, 15_000);
            expect(receiver.received.map((r) => r.event.data.filename).sort()).to.deep.equal(['r0.txt', 'r1.txt', 'r2.txt']);
            expect(receiver.received.every((r) => r.verified[0])).to.equal(true);
          } finally {
            await t.close();
          }
        });
      } finally {
        await receiver.close();
      }
    });
  });
}

describe('webhook deliveries from two instances on one PostgreSQL', function () {
  this.timeout(90_000);
  if (!backends.includes('postgresql')) return;

  it('when both instances relay 30 events written on both, looking every 10 ms, then each is delivered exactly once', async () => {
    const receiver = await startReceiver();
    // Both relays look every 10 ms, so their looks overlap and meet the same due messages.
    // The send timeout stays 10 s: a send cut on a loaded machine is rightly sent again
    // (at least once), and this test is about two relays claiming one message.
    const pair = await startTwoInstances(FAST, FAST, { webhooks: { ...FAST_RELAY.webhooks, pollMs: 10, timeoutMs: 10_000 } });
    try {
      const { apiKey } = await pair.a.account();
      const id = await subscribe(pair.a, apiKey, receiver);
      await Promise.all(Array.from({ length: 30 }, (_, i) => uploadFile((i % 2 ? pair.a : pair.b).server.url, apiKey, `pair-${i}.txt`, `pair ${i}`)));
      // Every send is a claim, and a claim counts an attempt: 30 delivered messages of one
      // attempt each were sent 30 times, and a delivered message is never claimed again.
      const shown = await eventually(() => deliveries(pair.a, apiKey, id), (d) => d.length === 30 && d.every((x: any) => x.status === 'delivered'), 20_000);
      expect(shown.map((d: any) => d.attempts)).to.deep.equal(Array(30).fill(1));
      expect(receiver.received).to.have.length(30);
      expect(new Set(receiver.received.map((r) => r.id)).size).to.equal(30);
      expect(receiver.received.every((r) => r.verified[0])).to.equal(true);
    } finally {
      await pair.close();
      await receiver.close();
    }
  });
});
