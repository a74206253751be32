// The SHA-256 a tus upload's file records (its download ETag), whichever
// way the hash was kept (src/tus/hash.ts): Node's crypto, held in the
// instance's memory between PATCHes (the row names it by a token, 17
// bytes); the digest alone once the last byte is in (33 bytes); hash-wasm's
// saved state for rows written before held hashes; and read back from the
// completed object when the hash is held nowhere (two instances: see
// tus-client.test.ts).
import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createSHA256 } from 'hash-wasm';
import { eventually } from '../helpers/raw-upload.js';
import { backends } from '../helpers/databases.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { create, digestReads, hashStateOf as rowHashState, head, leased, patch, streamingPatch, tusServer, uploadUrl } from '../helpers/tus.js';

const MiB = 1024 * 1024;
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');
/** The length of a held hash's state: a tag byte and a 16-byte token. */
const HELD = 17;

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
      const hashStateOf = (url: string) => rowHashState(server.t, url);

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
        // The cut PATCH's hash of what it stored stays held: the object is not read back.
        expect((await hashStateOf(url))?.length).to.equal(HELD);
        const reads = await digestReads(server.t);
        const rest = await eventually(() => patch(url, apiKey, offset, data.subarray(offset)), (r) => r.status !== 409);
        expect(rest.status).to.equal(204);
        expect(await etagOf(rest.headers.get('dropstream-public-link')!)).to.equal(`"${sha(data)}"`);
        expect(await digestReads(server.t)).to.equal(reads);
      });

      it('when an upload comes in several PATCHes to one instance, then its running hash is held there between them and the file records the SHA-256 without reading the object back', async () => {
        const { apiKey } = await server.t.account();
        const data = randomBytes(13 * MiB + 3);
        const url = uploadUrl(server.t.server.url, await create(server.t.server.url, apiKey, { length: data.length }));
        const reads = await digestReads(server.t);
        const cuts = [0, 5 * MiB + 1, 9 * MiB, data.length];
        let last: Awaited<ReturnType<typeof patch>> | undefined;
        for (let i = 0; i + 1 < cuts.length; i++) {
          last = await patch(url, apiKey, cuts[i]!, data.subarray(cuts[i], cuts[i + 1]));
          expect(last.status).to.equal(204);
          // Between PATCHes the row names the held hash (not hash-wasm's state, over 100 bytes); at the end it holds the digest.
          expect((await hashStateOf(url))?.length).to.equal(i + 2 < cuts.length ? HELD : 33);
        }
        expect(await etagOf(last!.headers.get('dropstream-public-link')!)).to.equal(`"${sha(data)}"`);
        expect(await digestReads(server.t)).to.equal(reads);
      });

      it('when a PATCH is refused for its checksum and sent again, then the held hash continues from before it and the file records the SHA-256 of the kept bytes', async () => {
        const { apiKey } = await server.t.account();
        const data = randomBytes(8 * MiB + 9);
        const url = uploadUrl(server.t.server.url, await create(server.t.server.url, apiKey, { length: data.length }));
        const half = 3 * MiB;
        expect((await patch(url, apiKey, 0, data.subarray(0, half))).status).to.equal(204);
        const rest = data.subarray(half);
        const checksum = (body: Buffer) => ({ 'Upload-Checksum': `sha256 ${createHash('sha256').update(body).digest('base64')}` });
        // Other bytes than the checksum names: refused, nothing kept; the hash they went into must not be the one held.
        const wrong = randomBytes(rest.length);
        expect((await patch(url, apiKey, half, wrong, checksum(rest))).status).to.equal(460);
        const reads = await digestReads(server.t);
        const done = await patch(url, apiKey, half, rest, checksum(rest));
        expect(done.status).to.equal(204);
        expect(await etagOf(done.headers.get('dropstream-public-link')!)).to.equal(`"${sha(data)}"`);
        expect(await digestReads(server.t)).to.equal(reads);
      });

      it('when a newer request takes over from a PATCH still sending, then the hash of what the old one stored is held and the newer one continues it', async () => {
        const { apiKey } = await server.t.account();
        const data = randomBytes(10 * MiB + 11);
        const url = uploadUrl(server.t.server.url, await create(server.t.server.url, apiKey, { length: data.length }));
        expect((await patch(url, apiKey, 0, data.subarray(0, 2 * MiB))).status).to.equal(204);
        const old = streamingPatch(url, apiKey, 2 * MiB, data.length - 2 * MiB);
        await old.send(data.subarray(2 * MiB, 5 * MiB + 7));
        await leased(server.t, url);
        // HEAD takes over (newest request wins): the old PATCH stores what is in flight, commits and lets go.
        const offset = Number((await head(url, apiKey)).headers.get('upload-offset'));
        expect(offset).to.be.within(2 * MiB + 1, 5 * MiB + 7);
        expect((await hashStateOf(url))?.length).to.equal(HELD);
        const reads = await digestReads(server.t);
        const done = await patch(url, apiKey, offset, data.subarray(offset));
        expect(done.status).to.equal(204);
        expect(await etagOf(done.headers.get('dropstream-public-link')!)).to.equal(`"${sha(data)}"`);
        expect(await digestReads(server.t)).to.equal(reads);
        old.cut();
      });

      it('when a row holds hash-wasm\'s running state (an upload in flight across the upgrade), then the next PATCH continues it and the file records the SHA-256 without reading the object back', async () => {
        const { apiKey } = await server.t.account();
        const data = randomBytes(7 * MiB + 1);
        const url = uploadUrl(server.t.server.url, await create(server.t.server.url, apiKey, { length: data.length }));
        const half = 5 * MiB + 3;
        expect((await patch(url, apiKey, 0, data.subarray(0, half))).status).to.equal(204);
        // What a server before held hashes saved after those bytes.
        const wasm = await createSHA256();
        wasm.init();
        wasm.update(data.subarray(0, half));
        const id = new URL(url).pathname.split('/').pop()!;
        await server.t.server.db.prisma.resumableUpload.update({ where: { id }, data: { hashState: new Uint8Array(wasm.save()) } });
        const reads = await digestReads(server.t);
        const done = await patch(url, apiKey, half, data.subarray(half));
        expect(done.status).to.equal(204);
        expect(await etagOf(done.headers.get('dropstream-public-link')!)).to.equal(`"${sha(data)}"`);
        expect(await digestReads(server.t)).to.equal(reads);
      });
    });
  }
});
