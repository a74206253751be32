import { createHash, randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { expect } from 'chai';
import { backends } from '../helpers/databases.js';
import { call, uploadFile } from '../helpers/client.js';
import { captureLog, type CapturedLog } from '../helpers/log-capture.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

for (const backend of backends) {
  describe(`public downloads (${backend})`, () => {
    let t: TestServer;
    // Its own server, for the request log: a request's line is its last act,
    // so "nothing was counted" is checked once the line is there, not after a sleep.
    let log: CapturedLog;
    let key: string;
    const content = randomBytes(300_000);
    let file: { file_id: number; public_link: string };

    before(async () => {
      log = captureLog('info');
      t = await startTestServer(backend, {}, log.logger);
      ({ apiKey: key } = await t.account());
      file = (await uploadFile(t.server.url, key, 'naïve "report".pdf', content)).body;
    });
    after(async () => {
      await t?.close();
    });
    const DOWNLOAD = '/download/:token';

    const downloadCount = async () =>
      (await call(t.url(`/api/v1/files/${file.file_id}`), { key })).body.file.download_count as number;

    /** The count once it has settled: it is recorded just after the last byte leaves the server. */
    async function settledCountOf(read: () => Promise<number>, expected: number): Promise<number> {
      let count = await read();
      for (let i = 0; i < 100 && count !== expected; i++) {
        await new Promise((r) => setTimeout(r, 20));
        count = await read();
      }
      return count;
    }
    const settledCount = (expected: number) => settledCountOf(downloadCount, expected);

    it('when the link is fetched, then the bytes come back with attachment headers, nosniff, length and ETag', async () => {
      const res = await fetch(t.url(file.public_link));
      expect(res.status).to.equal(200);
      expect(sha(Buffer.from(await res.arrayBuffer()))).to.equal(sha(content));
      expect(res.headers.get('content-type')).to.equal('application/octet-stream');
      expect(res.headers.get('content-disposition')).to.equal(
        `attachment; filename="naive 'report'.pdf"; filename*=UTF-8''na%C3%AFve%20%22report%22.pdf`,
      );
      expect(res.headers.get('x-content-type-options')).to.equal('nosniff');
      expect(res.headers.get('content-length')).to.equal('300000');
      expect(res.headers.get('etag')).to.equal(`"${sha(content)}"`);
      expect(res.headers.get('accept-ranges')).to.equal('bytes');
    });

    it('when the name is plain ASCII, then both filename and filename* are present', async () => {
      const up = await uploadFile(t.server.url, key, 'plain.txt', 'x');
      const res = await fetch(t.url(up.body.public_link));
      expect(res.headers.get('content-disposition')).to.equal(`attachment; filename=plain.txt; filename*=UTF-8''plain.txt`);
    });

    it('when a whole GET completes, then download_count rises by one; HEAD and partial ranges do not count', async () => {
      const before = await downloadCount();
      await (await fetch(t.url(file.public_link))).arrayBuffer();
      expect(await settledCount(before + 1)).to.equal(before + 1);

      const head = await fetch(t.url(file.public_link), { method: 'HEAD' });
      expect(head.status).to.equal(200);
      expect(head.headers.get('content-length')).to.equal('300000');
      expect(await head.text()).to.equal('');
      await (await fetch(t.url(file.public_link), { headers: { Range: 'bytes=10-19' } })).arrayBuffer();
      expect(await downloadCount()).to.equal(before + 1);

      // A range from the first byte to the last is the whole file.
      await (await fetch(t.url(file.public_link), { headers: { Range: 'bytes=0-' } })).arrayBuffer();
      expect(await settledCount(before + 2)).to.equal(before + 2);
    });

    it('when concurrent downloads complete, then every one is counted', async () => {
      const before = await downloadCount();
      await Promise.all(Array.from({ length: 10 }, async () => (await fetch(t.url(file.public_link))).arrayBuffer()));
      expect(await settledCount(before + 10)).to.equal(before + 10);
    });

    it('when the client hangs up mid-download, then it is not counted; a whole download of the same file is', async () => {
      const big = randomBytes(8 * 1024 * 1024);
      const up = await uploadFile(t.server.url, key, 'big.bin', big);
      const count = async () => (await call(t.url(`/api/v1/files/${up.body.file_id}`), { key })).body.file.download_count as number;
      const mark = log.requests().length;
      const started = await new Promise<{ status: number; received: number }>((resolve, reject) => {
        const req = request(t.url(up.body.public_link), (res) => {
          res.once('data', (chunk: Buffer) => {
            req.destroy();
            resolve({ status: res.statusCode!, received: chunk.length });
          });
        });
        req.on('error', reject);
        req.end();
      });
      // The download really started, and was cut before its end.
      expect(started.status).to.equal(200);
      expect(started.received).to.be.within(1, big.length - 1);
      expect((await log.requestsAfter(mark, DOWNLOAD)).map((l) => l.status)).to.deep.equal([499]);
      expect(await count()).to.equal(0);

      const whole = await fetch(t.url(up.body.public_link));
      expect(sha(Buffer.from(await whole.arrayBuffer()))).to.equal(sha(big));
      expect((await log.requestsAfter(mark, DOWNLOAD, 2)).map((l) => l.status)).to.deep.equal([499, 200]);
      expect(await settledCountOf(count, 1)).to.equal(1);
    });

    it('when a single range is asked for, then 206 with exactly those bytes and Content-Range', async () => {
      const res = await fetch(t.url(file.public_link), { headers: { Range: 'bytes=100-199' } });
      expect(res.status).to.equal(206);
      expect(res.headers.get('content-range')).to.equal('bytes 100-199/300000');
      expect(res.headers.get('content-length')).to.equal('100');
      expect(Buffer.from(await res.arrayBuffer()).equals(content.subarray(100, 200))).to.equal(true);
      const suffix = await fetch(t.url(file.public_link), { headers: { Range: 'bytes=-10' } });
      expect(suffix.status).to.equal(206);
      expect(Buffer.from(await suffix.arrayBuffer()).equals(content.subarray(-10))).to.equal(true);
    });

    it('when a suffix range is longer than the file, then 206 with the whole file (RFC 9110 14.1.2)', async () => {
      const one = await uploadFile(t.server.url, key, 'one.bin', 'x');
      const res = await fetch(t.url(one.body.public_link), { headers: { Range: 'bytes=-500' } });
      expect(res.status).to.equal(206);
      expect(res.headers.get('content-range')).to.equal('bytes 0-0/1');
      expect(await res.text()).to.equal('x');
      const longer = await fetch(t.url(file.public_link), { headers: { Range: 'bytes=-1000000' } });
      expect(longer.status).to.equal(206);
      expect(longer.headers.get('content-range')).to.equal('bytes 0-299999/300000');
      expect(sha(Buffer.from(await longer.arrayBuffer()))).to.equal(sha(content));
      // Also inside a list: the first satisfiable range is served.
      const listed = await fetch(t.url(one.body.public_link), { headers: { Range: 'bytes=5-9, -500' } });
      expect(listed.status).to.equal(206);
      expect(listed.headers.get('content-range')).to.equal('bytes 0-0/1');
      await listed.arrayBuffer();
    });

    it('when a suffix is empty (-0) or the file is empty, then 416', async () => {
      const zero = await call(t.url(file.public_link), { headers: { Range: 'bytes=-0' } });
      expect(zero.status).to.equal(416);
      const empty = await uploadFile(t.server.url, key, 'empty.bin', '');
      const suffix = await call(t.url(empty.body.public_link), { headers: { Range: 'bytes=-500' } });
      expect(suffix.status).to.equal(416);
      expect(suffix.headers.get('content-range')).to.equal('bytes */0');
    });

    it('when the range cannot be satisfied, then 416 with Content-Range: bytes */size', async () => {
      const res = await call(t.url(file.public_link), { headers: { Range: 'bytes=300000-' } });
      expect(res.status).to.equal(416);
      expect(res.headers.get('content-range')).to.equal('bytes */300000');
      expect(res.body.error.code).to.equal('range_not_satisfiable');
    });

    it('when If-None-Match carries the ETag, then 304 and no count', async () => {
      const before = await downloadCount();
      const mark = log.requests().length;
      const etag = `"${sha(content)}"`;
      // Not fetch: it adds Cache-Control: no-cache to conditional requests, which rightly disables 304.
      const status = await new Promise<number>((resolve, reject) => {
        request(t.url(file.public_link), { headers: { 'If-None-Match': etag } }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        })
          .on('error', reject)
          .end();
      });
      expect(status).to.equal(304);
      expect((await log.requestsAfter(mark, DOWNLOAD)).map((l) => l.status)).to.deep.equal([304]);
      expect(await downloadCount()).to.equal(before);
    });

    it('when the token is unknown, malformed or has its case changed, then 404 JSON', async () => {
      const token = file.public_link.split('/').pop()!;
      const swapped = token.replace(/[a-z]/, (c) => c.toUpperCase()) === token ? token.toLowerCase() : token.replace(/[a-z]/, (c) => c.toUpperCase());
      for (const bad of ['AAAAAAAAAAAAAAAAAAAAAA', 'short', token.slice(0, -1), swapped, '..%2F..%2Fetc%2Fpasswd']) {
        const res = await call(t.url(`/download/${bad}`));
        expect(res.status, bad).to.equal(404);
        expect(res.body.success).to.equal(false);
      }
    });

    it('when an .html file is downloaded, then it is an attachment that cannot run in our origin', async () => {
      const up = await uploadFile(t.server.url, key, 'evil.html', '<script>alert(1)</script>');
      const res = await fetch(t.url(up.body.public_link));
      expect(res.headers.get('content-type')).to.equal('application/octet-stream');
      expect(res.headers.get('content-disposition')).to.match(/^attachment;/);
      expect(res.headers.get('content-security-policy')).to.include("default-src 'none'");
    });

    it('when the download needs no key, then a request without Authorization succeeds', async () => {
      const res = await fetch(t.url(file.public_link), { headers: {} });
      expect(res.status).to.equal(200);
      await res.arrayBuffer();
    });
  });
}
