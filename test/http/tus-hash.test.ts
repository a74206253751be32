// The SHA-256 a tus upload's file records (its download ETag), whichever
// way the hash was kept (src/tus/hash.ts): a body carrying the
// whole upload is hashed by Node's crypto and keeps only the digest; cut
// short, the upload's bytes are hashed from the completed object instead.
import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { eventually } from '../helpers/raw-upload.js';
import { backends } from '../helpers/databases.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { create, head, patch, streamingPatch, tusServer, uploadUrl } from '../helpers/tus.js';

const MiB = 1024 * 1024;
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

describe('resumable uploads (tus): the SHA-256 of the file', () => {
  let s3: TestS3;
  before(async () => {
    s3 = await startTestS3();
  });
  after(async () => {
    await s3.close();
  });

  for (const store of ['local', 's3'] as const) {
    describe(`on ${backends[0]} with the ${store} store`, function () {
      this.timeout(60_000);
      let server: Awaited<ReturnType<typeof tusServer>>;
      before(async () => {
        server = await tusServer(backends[0]!, store, () => s3);
      });
      after(() => server.close());

      const etagOf = async (link: string) => (await fetch(server.t.url(link), { method: 'HEAD' })).headers.get('etag');
      const hashStateOf = async (url: string) => {
        const id = new URL(url).pathname.split('/').pop()!;
        return (await server.t.server.db.prisma.resumableUpload.findUnique({ where: { id }, select: { hashState: true } }))?.hashState;
      };

      it('when the whole upload comes in one PATCH, then the file records the SHA-256 of its bytes and the upload kept only the digest', async () => {
        const { apiKey } = await server.t.account();
        const data = randomBytes(6 * MiB + 7);
        const url = uploadUrl(server.t.server.url, await create(server.t.server.url, apiKey, { length: data.length }));
        const res = await patch(url, apiKey, 0, data);
        expect(res.status).to.equal(204);
        expect(await etagOf(res.headers.get('dropstream-public-link')!)).to.equal(`"${sha(data)}"`);
        // The digest and a tag byte, not hash-wasm's running state (over 100 bytes).
        expect((await hashStateOf(url))?.length).to.equal(33);
      });

      it('when a PATCH carrying the whole upload is cut and the rest comes in another, then the file records the SHA-256 of all its bytes', async () => {
        const { apiKey } = await server.t.account();
        const data = randomBytes(9 * MiB + 5);
        const url = uploadUrl(server.t.server.url, await create(server.t.server.url, apiKey, { length: data.length }));
        const cut = streamingPatch(url, apiKey, 0, data.length);
        await cut.send(data.subarray(0, 6 * MiB + 12_345));
        // HEAD takes over from the cut PATCH (newest request wins): the offset is what it stored.
        const stored = async () => Number((await head(url, apiKey)).headers.get('upload-offset'));
        cut.cut();
        const offset = await eventually(stored, (n) => n > 0);
        const rest = await eventually(() => patch(url, apiKey, offset, data.subarray(offset)), (r) => r.status !== 409);
        expect(rest.status).to.equal(204);
        expect(await etagOf(rest.headers.get('dropstream-public-link')!)).to.equal(`"${sha(data)}"`);
      });
    });
  }
});
