import { randomBytes } from 'node:crypto';
import { request, type ClientRequest } from 'node:http';
import { expect } from 'chai';
import { uploadFile } from '../helpers/client.js';
import { BOUNDARY, multipartType } from '../helpers/multipart.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Starts an upload and leaves it open after `first` bytes of file content; resolves with the response when it comes. */
function openUpload(t: TestServer, key: string, first: Buffer) {
  let req!: ClientRequest;
  const response = new Promise<{ status: number; body: any }>((resolve, reject) => {
    req = request(`${t.server.url}/api/v1/files/upload`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': multipartType() },
    });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.write(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="slow.bin"\r\n\r\n`);
    req.write(first);
  });
  return {
    response,
    finish: () => req.end(`\r\n--${BOUNDARY}--\r\n`),
  };
}

describe('upload failures and limits on one instance (pglite)', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer('pglite', { UPLOAD_CONCURRENCY: '1' });
  });
  after(async () => {
    await t.close();
  });

  it('when UPLOAD_CONCURRENCY uploads are in flight, then one more gets 503 server_busy with Retry-After, and a slot frees when one ends', async () => {
    const { apiKey } = await t.account();
    const slow = openUpload(t, apiKey, randomBytes(1000));
    expect(await eventually(async () => (await t.tempFiles()).length > 0, (met) => met)).to.equal(true);
    const busy = await uploadFile(t.server.url, apiKey, 'second.txt', 'x');
    expect(busy.status).to.equal(503);
    expect(busy.body.error.code).to.equal('server_busy');
    expect(busy.headers.get('retry-after')).to.equal('5');
    slow.finish();
    expect((await slow.response).status).to.equal(201);
    expect((await uploadFile(t.server.url, apiKey, 'third.txt', 'x')).status).to.equal(201);
  });

  it('when the file row cannot be written after the object is complete, then the object is removed and no row remains', async () => {
    const { accountId, apiKey } = await t.account();
    const before = await t.objects();
    const upload = openUpload(t, apiKey, randomBytes(5000));
    expect(await eventually(async () => (await t.tempFiles()).length > 0, (met) => met)).to.equal(true);
    // The account vanishes mid-upload, so the insert fails on its foreign key.
    await t.server.db.prisma.account.delete({ where: { id: accountId } });
    upload.finish();
    const res = await upload.response;
    expect(res.status).to.equal(500);
    expect(res.body).to.deep.equal({ success: false, error: { code: 'internal_error', message: 'Internal server error' } });
    expect(await t.server.db.prisma.file.count({ where: { accountId } })).to.equal(0);
    expect(await t.objects()).to.deep.equal(before);
    expect(await t.tempFiles()).to.deep.equal([]);
  });
});
