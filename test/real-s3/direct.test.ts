// Real S3 only (TEST_S3_ENDPOINT; CI runs these on Ceph RGW, .ci/rgw-suites.sh):
// uploads straight to the store (issue 55) against a store that checks
// signatures, which s3rver does not. A part URL is signed with its part's
// exact Content-Length, so the store itself refuses a body of another
// length (larger or smaller) and a URL used for another part number; a
// part under 5 MiB that is not the last is refused at complete by the store.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { directClient, MiB, putAll, putPart, sha, type PartUrl } from '../direct/direct-client.js';
import { requireRealS3 } from './require-real-s3.js';

requireRealS3();

describe('real S3: uploads straight to the store', function () {
  this.timeout(120_000);
  let s3: TestS3;
  let t: TestServer;
  before(async () => {
    s3 = await startTestS3();
    t = await startTestServer('pglite', { ...s3.env(s3.bucket('direct')), S3_DIRECT_UPLOADS: 'true', S3_PUBLIC_ENDPOINT: s3.endpoint.replace('127.0.0.1', 'localhost') });
  });
  after(async () => {
    await t?.close();
    await s3?.close();
  });

  it('when a part is sent with more or fewer bytes than its URL was signed for, or to another part\'s URL, then the store refuses it; the right bytes then complete a file', async () => {
    const { apiKey } = await t.account();
    const api = directClient(t.url('/api/v1/uploads/direct'), apiKey);
    const data = randomBytes(7 * MiB);
    const created = await api.create({ filename: 'signed.bin', size: data.length, part_size: 5 * MiB });
    expect(created.status).to.equal(201);
    const [first, second] = created.body.part_urls as PartUrl[];
    expect(new URL(first!.url).searchParams.get('X-Amz-SignedHeaders')).to.equal('content-length;host');
    const larger = await putPart(first!.url, Buffer.concat([data.subarray(0, 5 * MiB), Buffer.from('x')]));
    const smaller = await putPart(first!.url, data.subarray(0, 5 * MiB - 1));
    expect([larger.status, smaller.status]).to.deep.equal([403, 403]);
    expect(larger.text).to.match(/SignatureDoesNotMatch/);
    // Part 2's URL (2 MiB signed) for part 1's bytes.
    expect((await putPart(second!.url, data.subarray(0, 5 * MiB))).status).to.equal(403);
    expect((await api.view(created.body.upload_id)).body.parts_stored).to.deep.equal([]);
    const done = await api.complete(created.body.upload_id, await putAll(data, 5 * MiB, created.body.part_urls));
    expect(done.status, done.text).to.equal(201);
    expect(sha(Buffer.from(await (await fetch(t.url(done.body.public_link))).arrayBuffer()))).to.equal(sha(data));
  });

  it('when a URL is used after its upload was aborted, then the store refuses the part', async () => {
    const { apiKey } = await t.account();
    const api = directClient(t.url('/api/v1/uploads/direct'), apiKey);
    const created = await api.create({ filename: 'gone.bin', size: MiB });
    expect((await api.abort(created.body.upload_id)).status).to.equal(200);
    expect((await putPart(created.body.part_urls[0].url, randomBytes(MiB))).status).to.equal(404);
  });
});
