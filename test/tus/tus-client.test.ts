// tus as clients others wrote speak it: the official tus-js-client, in
// Node, through a proxy that cuts the connection mid-upload; and two
// instances of the server sharing one database and one store.
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { expect } from 'chai';
import { Upload } from 'tus-js-client';
import { call } from '../helpers/client.js';
import { backends, createTestDatabase } from '../helpers/databases.js';
import { startCuttingProxy } from '../helpers/cutting-proxy.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { create, digestReads, head, leased, patch, streamingPatch, tusServer, uploadUrl } from '../helpers/tus.js';

const MiB = 1024 * 1024;
// Large enough that each cut lands mid-stream with several S3 parts on either
// side; 200 MiB (as first written) tested nothing more and cost CI about a minute.
const SIZE = 64 * MiB;

async function sha256Of(stream: AsyncIterable<Buffer>): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk);
  return hash.digest('hex');
}

/** The SHA-256 the file of a public link records (its ETag), as a download's HEAD answers it. */
async function recordedSha(t: TestServer, link: string): Promise<string | undefined> {
  return (await fetch(t.url(link), { method: 'HEAD' })).headers.get('etag')?.replaceAll('"', '');
}

async function downloadSha(t: TestServer, link: string): Promise<string> {
  const res = await fetch(t.url(link));
  expect(res.status).to.equal(200);
  return sha256Of(res.body as unknown as AsyncIterable<Buffer>);
}

describe('resumable uploads with tus-js-client', function () {
  this.timeout(300_000);
  let s3: TestS3;
  let dir: string;
  let path: string;
  let sha: string;

  before(async () => {
    s3 = await startTestS3();
    dir = await mkdtemp(join(tmpdir(), 'dropstream-tus-'));
    path = join(dir, 'big.bin');
    const hash = createHash('sha256');
    await pipeline(
      async function* () {
        for (let i = 0; i < SIZE / MiB; i++) {
          const block = randomBytes(MiB);
          hash.update(block);
          yield block;
        }
      },
      createWriteStream(path),
    );
    sha = hash.digest('hex');
  });
  after(async () => {
    await s3.close();
    await rm(dir, { recursive: true, force: true });
  });

  for (const backend of backends) {
    for (const store of ['local', 's3'] as const) {
      it(`when a 64 MiB upload is cut twice mid-stream (${backend}, ${store} store), then tus-js-client resumes by itself and the download's SHA-256 matches`, async () => {
        const server = await tusServer(backend, store, () => s3);
        const proxy = await startCuttingProxy(server.t.server.url, [20 * MiB, 44 * MiB]);
        try {
          const { apiKey } = await server.t.account();
          const offsets: number[] = [];
          const url = await new Promise<string>((resolve, reject) => {
            const upload = new Upload(createReadStream(path), {
              endpoint: `${proxy.url}/api/v1/uploads`,
              headers: { Authorization: `Bearer ${apiKey}` },
              metadata: { filename: 'big.bin' },
              retryDelays: [0, 250, 500, 1000, 2000, 4000],
              onAfterResponse: (req, res) => {
                if (req.getMethod() === 'HEAD') offsets.push(Number(res.getHeader('Upload-Offset')));
              },
              onError: reject,
              onSuccess: () => resolve(upload.url!),
            });
            upload.start();
          });
          expect(proxy.cuts()).to.equal(2);
          // Each resume started where the server had stopped, not from 0.
          expect(offsets.filter((o) => o > 0).length).to.be.at.least(2);
          expect(proxy.relayed()).to.be.below(SIZE + 24 * MiB);
          const answer = await call(url.replace(proxy.url, server.t.server.url), { key: apiKey });
          expect(answer.body.file).to.include({ filename: 'big.bin', size: SIZE });
          expect(await downloadSha(server.t, answer.body.file.public_link)).to.equal(sha);
          const metrics = await server.t.server.metrics.registry.getSingleMetricAsString('dropstream_resumed_bytes_total');
          expect(Number(/ (\d+)$/m.exec(metrics)?.[1])).to.be.greaterThan(0);
          expect(await server.leftovers()).to.deep.equal([]);
        } finally {
          await proxy.close();
          await server.close();
        }
      });
    }
  }

  if (backends.includes('postgresql')) {
    for (const store of ['local', 's3'] as const) {
      describe(`two instances on one PostgreSQL (${store} store)`, () => {
        let a: TestServer;
        let b: TestServer;
        let drop: () => Promise<void>;
        before(async () => {
          const db = await createTestDatabase();
          drop = db.drop;
          const bucket = store === 's3' ? s3.bucket('tus-two') : '';
          const env = { DATABASE_URL: db.url, ...(store === 's3' ? { ...s3.env(bucket), S3_PART_SIZE: String(5 * MiB) } : {}) };
          a = await startTestServer('postgresql', env);
          // The local store is shared through the folder, as a network file system would share it.
          b = await startTestServer('postgresql', store === 'local' ? { ...env, DATA_DIR: a.dataDir } : env);
        });
        after(async () => {
          await b.close().catch(() => {});
          await a.close();
          await drop();
        });

        it('when instance A creates and writes half, then instance B continues and finishes it', async () => {
          const { apiKey } = await a.account();
          const data = randomBytes(11 * MiB + 77);
          const created = await create(a.server.url, apiKey, { length: data.length });
          const path = created.headers.get('location')!;
          expect((await patch(a.server.url + path, apiKey, 0, data.subarray(0, 6 * MiB + 5))).status).to.equal(204);
          expect((await head(b.server.url + path, apiKey)).headers.get('upload-offset')).to.equal(String(6 * MiB + 5));
          const reads = await digestReads(b);
          const done = await patch(b.server.url + path, apiKey, 6 * MiB + 5, data.subarray(6 * MiB + 5));
          expect(done.status).to.equal(204);
          const sha = createHash('sha256').update(data).digest('hex');
          expect(await downloadSha(a, done.headers.get('dropstream-public-link')!)).to.equal(sha);
          // A held the running hash; B, which finished, read the object once for the SHA-256 it records.
          expect(await recordedSha(a, done.headers.get('dropstream-public-link')!)).to.equal(sha);
          expect(await digestReads(b)).to.equal(reads + 1);
        });

        it('when consecutive PATCHes alternate between A and B, then the file records the SHA-256 of all its bytes', async () => {
          const { apiKey } = await a.account();
          const data = randomBytes(12 * MiB + 13);
          const path = (await create(a.server.url, apiKey, { length: data.length })).headers.get('location')!;
          const cuts = [0, 5 * MiB + 1, 9 * MiB + 2, data.length];
          const instances = [a, b, a];
          let last: Awaited<ReturnType<typeof patch>> | undefined;
          for (let i = 0; i < instances.length; i++) {
            last = await patch(instances[i]!.server.url + path, apiKey, cuts[i]!, data.subarray(cuts[i], cuts[i + 1]));
            expect(last.status, `PATCH ${i + 1}`).to.equal(204);
          }
          expect(await recordedSha(a, last!.headers.get('dropstream-public-link')!)).to.equal(createHash('sha256').update(data).digest('hex'));
        });

        it('when two PATCHes reach the two instances at once, then the newer one wins on the other instance and the bytes are never interleaved', async () => {
          const { apiKey } = await a.account();
          const data = randomBytes(7 * MiB);
          const url = uploadUrl(a.server.url, await create(a.server.url, apiKey, { length: data.length }));
          const slow = streamingPatch(url, apiKey, 0, data.length);
          await slow.send(data.subarray(0, 2 * MiB));
          await leased(a, url);
          const other = await patch(url.replace(a.server.url, b.server.url), apiKey, 0, data);
          expect(other.status).to.equal(409);
          expect(other.body.error.code).to.equal('upload_offset_mismatch');
          const stored = Number(other.headers.get('upload-offset'));
          expect(stored).to.be.within(1, 2 * MiB);
          expect((await slow.response).status).to.not.equal(204);
          const done = await patch(url.replace(a.server.url, b.server.url), apiKey, stored, data.subarray(stored));
          expect(done.status).to.equal(204);
          expect(await downloadSha(b, done.headers.get('dropstream-public-link')!)).to.equal(createHash('sha256').update(data).digest('hex'));
          // A's taken-over PATCH held the hash of what it stored; B, taking over, could not continue it.
          expect(await recordedSha(b, done.headers.get('dropstream-public-link')!)).to.equal(createHash('sha256').update(data).digest('hex'));
        });
      });
    }
  }
});
