// The newest request for an upload wins: a connection that died (silently
// or not) leaves a PATCH holding the upload's lease; the client's next
// request asks it to stop, it stores what it received and ends, and the
// client goes on from there. tus-js-client with its default retry delays,
// through proxies that cut the connection; on one instance and across two.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { Upload } from 'tus-js-client';
import { call } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { startCuttingProxy } from '../helpers/cutting-proxy.js';
import { freshPrefix, redisUrl } from '../helpers/redis.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startTwoInstances, type TestServer } from '../helpers/server.js';
import { create, download, head, leased, patch, streamingPatch, tusServer, uploadUrl } from '../helpers/tus.js';

const MiB = 1024 * 1024;
const SIZE = 48 * MiB;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/** tus-js-client with its default retry delays; resolves with the upload URL. */
function tusUpload(data: Buffer, endpoint: string, apiKey: string, uploadUrl?: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const upload = new Upload(data, {
      endpoint,
      uploadUrl,
      headers: { Authorization: `Bearer ${apiKey}` },
      metadata: { filename: 'big.bin' },
      onError: reject,
      onSuccess: () => resolve(upload.url!),
    });
    upload.start();
  });
}

/** An account's upload of 9 MiB with a PATCH still open after its first 6 MiB, reading them (it holds the lease). */
async function livePatch(server: { t: TestServer }, data: Buffer) {
  const { apiKey } = await server.t.account();
  const small = data.subarray(0, 9 * MiB);
  const url = uploadUrl(server.t.server.url, await create(server.t.server.url, apiKey, { length: small.length }));
  const live = streamingPatch(url, apiKey, 0, small.length);
  await live.send(small.subarray(0, 6 * MiB));
  // The PATCH is reading: what was sent is read by it, before it gives way too.
  await leased(server.t, url);
  return { apiKey, small, url, live };
}

async function fileOf(t: TestServer, url: string, apiKey: string): Promise<Buffer> {
  const answer = await call(url, { key: apiKey });
  expect(answer.status).to.equal(200);
  expect(answer.body.file, JSON.stringify(answer.body)).to.not.equal(null);
  return download(t, answer.body.file.public_link);
}

describe('resumable uploads: the newest request wins', function () {
  this.timeout(180_000);
  let s3: TestS3;
  let data: Buffer;
  before(async () => {
    s3 = await startTestS3();
    data = randomBytes(SIZE);
  });
  after(async () => {
    await s3.close();
  });

  for (const backend of backends) {
    for (const store of ['local', 's3'] as const) {
      for (const silent of [true, false]) {
        it(`when the connection is cut ${silent ? 'silently (client side only)' : 'by a reset'} after 16 of 48 MiB (${backend}, ${store} store), then tus-js-client with its default retry delays finishes, sending at most 1.05x the file`, async () => {
          const server = await tusServer(backend, store, () => s3);
          const proxy = await startCuttingProxy(server.t.server.url, [16 * MiB], { silent });
          try {
            const { apiKey } = await server.t.account();
            const url = await tusUpload(data, `${proxy.url}/api/v1/uploads`, apiKey);
            expect(proxy.cuts()).to.equal(1);
            // Issue 19: at most 1.05x for both kinds of cut. What the server's buffers held when the
            // connection died is read and stored by the old PATCH before it gives way (it measured
            // 1.0013x for both: only the last 64 KiB were resent); a reset resent 1.06-1.08x while the
            // old PATCH stopped at once, and 1.28-1.32x before the newest request won.
            expect(proxy.relayed() / SIZE).to.be.at.most(1.05);
            const stored = await fileOf(server.t, url.replace(proxy.url, server.t.server.url), apiKey);
            expect(sha(stored)).to.equal(sha(data));
            expect(await server.leftovers()).to.deep.equal([]);
          } finally {
            await proxy.close();
            await server.close();
          }
        });
      }

      it(`when a HEAD comes during a live PATCH (${backend}, ${store} store), then it answers the offset that PATCH stored when it stopped, and the PATCH's request ends`, async () => {
        const server = await tusServer(backend, store, () => s3);
        try {
          const { apiKey, small, url, live } = await livePatch(server, data);
          const status = await head(url, apiKey);
          expect(status.status).to.equal(200);
          const offset = Number(status.headers.get('upload-offset'));
          // Within the deadline: the old request ended, it did not hang.
          const ended = await Promise.race([live.response.then(() => true), sleep(10_000).then(() => false)]);
          expect(ended).to.equal(true);
          // Everything that was sent: the PATCH read what was in flight before it stopped.
          expect(offset).to.equal(6 * MiB);
          const done = await patch(url, apiKey, offset, small.subarray(offset));
          expect(done.status).to.equal(204);
          expect(sha(await download(server.t, done.headers.get('dropstream-public-link')!))).to.equal(sha(small));
          expect(await server.leftovers()).to.deep.equal([]);
        } finally {
          await server.close();
        }
      });
    }
  }

  it('when the JSON view of an upload is polled during a live PATCH, then it shows the offset stored before that PATCH (it does not stop it to learn more) and the PATCH goes on to 204 (a progress poll is not a resuming client)', async () => {
    const server = await tusServer('pglite', 'local', () => s3);
    try {
      const { apiKey, small, url, live } = await livePatch(server, data);
      const polls = [];
      for (let i = 0; i < 3; i++) polls.push(await call(url, { key: apiKey }));
      for (const poll of polls) expect(poll.status).to.equal(200);
      const last = polls.at(-1)!.body as { upload: { offset: number; length: number } };
      expect(last.upload.length).to.equal(small.length);
      // A takeover would have stopped the PATCH and shown the 6 MiB it stored by then.
      expect(last.upload.offset).to.equal(0);
      live.end(small.subarray(6 * MiB));
      const done = await live.response;
      expect(done.status).to.equal(204);
      expect(sha(await download(server.t, String(done.headers?.['dropstream-public-link'])))).to.equal(sha(small));
    } finally {
      await server.close();
    }
  });

  for (const backend of backends) {
    it(`when a HEAD comes while a PATCH's client is alive and still sending (${backend}), then that PATCH reads on for its grace (2 s, a quarter of the default takeover time) and gives way well before the takeover time (10 s), answers 409 with the offset it stored, and the HEAD answers the same`, async () => {
      const server = await tusServer(backend, 'local', () => s3);
      try {
        const { apiKey } = await server.t.account();
        const url = uploadUrl(server.t.server.url, await create(server.t.server.url, apiKey, { length: SIZE }));
        const live = streamingPatch(url, apiKey, 0, SIZE);
        let answered = false;
        const response = live.response.then((r) => ((answered = true), r));
        let sent = 0;
        /** When each chunk went (ms since the epoch): a loaded machine can leave the sender quiet. */
        const sentAt: number[] = [];
        const sending = (async () => {
          // About 3 MiB/s, never quiet for long: what a slow but live client sends.
          while (!answered && sent < SIZE) {
            await live.send(data.subarray(sent, sent + 64 * 1024));
            sent += 64 * 1024;
            sentAt.push(Date.now());
            await sleep(20);
          }
        })();
        await sleep(1000);
        const started = Date.now();
        const status = await head(url, apiKey);
        const took = Date.now() - started;
        expect(status.status).to.equal(200);
        // It read on for the grace (bytes kept coming), then gave way: not at
        // once, and well before the takeover time (10 s), after which the HEAD
        // would not have waited for it. A sender quiet for 150 ms ends the
        // grace early, as it should: on a loaded machine this one can be
        // (832 ms once), so the floor is 1 s or the first such silence after
        // the HEAD went, whichever came first.
        const quietAt = sentAt.findIndex((at, i) => i > 0 && at > started && at - sentAt[i - 1]! > 150);
        const floor = Math.min(1000, quietAt === -1 ? Infinity : sentAt[quietAt - 1]! - started);
        expect(took, `the first silence of the sender began ${quietAt === -1 ? 'never' : `${sentAt[quietAt - 1]! - started} ms`} after the HEAD`).to.be.within(floor, 6000);
        const old = await response;
        await sending;
        expect(old.status).to.equal(409);
        expect(old.headers?.['connection']).to.equal('close');
        expect(old.headers?.['upload-offset']).to.equal(status.headers.get('upload-offset'));
        expect(Number(status.headers.get('upload-offset'))).to.be.within(1, sent);
      } finally {
        await server.close();
      }
    });
  }

  if (backends.includes('postgresql')) {
    const carriers = [...(redisUrl ? [{ name: 'Redis pub/sub', env: () => ({ REDIS_URL: redisUrl, REDIS_KEY_PREFIX: freshPrefix() }) }] : []), { name: 'PostgreSQL NOTIFY', env: () => ({}) }];
    for (const carrier of carriers) {
      for (const store of ['local', 's3'] as const) {
        it(`when an upload's PATCH hangs on instance A and tus-js-client resumes through instance B (${carrier.name}, ${store} store), then B takes over and it finishes`, async () => {
          const bucket = store === 's3' ? s3.bucket(`tus-takeover-${carrier.name.startsWith('R') ? 'r' : 'p'}`) : '';
          const env = { ...carrier.env(), ...(store === 's3' ? { ...s3.env(bucket), S3_PART_SIZE: String(5 * MiB) } : {}) };
          // The local store is shared through one folder, as a network file system would share it.
          const dataDir = store === 'local' ? await mkdtemp(join(tmpdir(), 'dropstream-takeover-')) : undefined;
          const two = await startTwoInstances({ ...env, ...(dataDir ? { DATA_DIR: dataDir } : {}) }, { ...env, ...(dataDir ? { DATA_DIR: dataDir } : {}) });
          const { a, b } = two;
          try {
            const { apiKey } = await a.account();
            const path = (await create(a.server.url, apiKey, { length: SIZE })).headers.get('location')!;
            const hanging = streamingPatch(a.server.url + path, apiKey, 0, SIZE);
            await hanging.send(data.subarray(0, 8 * MiB));
            await leased(a, a.server.url + path);
            const resumed = tusUpload(data, `${b.server.url}/api/v1/uploads`, apiKey, b.server.url + path);
            // B's first request asked A's PATCH to stop: it ends well within the takeover time, it does not hang.
            const ended = await Promise.race([hanging.response.then(() => true), sleep(8_000).then(() => false)]);
            expect(ended).to.equal(true);
            const url = await resumed;
            expect(sha(await fileOf(b, url, apiKey))).to.equal(sha(data));
          } finally {
            await two.close();
            if (dataDir) await rm(dataDir, { recursive: true, force: true });
          }
        });
      }
    }
  }
});
