import { createHash, randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { expect } from 'chai';
import { backends } from '../helpers/databases.js';
import { call, upload, uploadFile } from '../helpers/client.js';
import { accountState } from '../helpers/account-state.js';
import { BOUNDARY, multipartBody, multipartType } from '../helpers/multipart.js';
import { eventually } from '../helpers/raw-upload.js';
import { PUBLIC_URL } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';
import type { TestServer } from '../helpers/server.js';

const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

for (const backend of backends) {
  describe(`POST /files/upload (${backend})`, () => {
    let t: TestServer;
    let key: string;
    let accountId: number;

    before(async () => {
      t = await sharedServer(backend);
      await t.plan('tiny', { api_access: true, requests_per_minute: 1000, requests_per_day: 10000, max_file_size: 1000, daily_uploads: 1000 });
    });
    beforeEach(async () => {
      ({ apiKey: key, accountId } = await t.account('tiny'));
    });

    /**
     * No object, no temp file, and in the database no file row, no pending
     * record and no daily slot kept (the upload was refused or cut, so its
     * slot comes back). Clean-up may finish after the answer: waited for.
     */
    async function expectNothingStored(before: string[]) {
      const state = async () => ({ objects: await t.objects(), temp: await t.tempFiles(), ...(await accountState(t, accountId)) });
      const nothing = { objects: before, temp: [], rows: 0, pending: 0, quota: 0 };
      expect(await eventually(state, (s) => JSON.stringify(s) === JSON.stringify(nothing), 10_000)).to.deep.equal(nothing);
    }

    // The spec: the upload response "carries file_id, public_link, size and filename only" (with success).
    it('when a file is uploaded, then 201 carries exactly success, file_id, public_link, size and filename (the spec\'s key set)', async () => {
      const content = randomBytes(777);
      const res = await uploadFile(t.server.url, key, 'report.pdf', content);
      expect(res.status).to.equal(201);
      expect(Object.keys(res.body)).to.deep.equal(['success', 'file_id', 'public_link', 'size', 'filename']);
      expect(res.body).to.include({ success: true, size: 777, filename: 'report.pdf' });
      expect(res.body.file_id).to.be.a('number').and.greaterThan(0);
      expect(res.body.public_link).to.match(new RegExp(`^${PUBLIC_URL}/download/[A-Za-z0-9_-]{22,}$`));
      const download = await fetch(t.url(res.body.public_link));
      expect(sha(Buffer.from(await download.arrayBuffer()))).to.equal(sha(content));
    });

    it('when the file is exactly the plan limit, then it is accepted', async () => {
      const res = await uploadFile(t.server.url, key, 'exact.bin', randomBytes(1000));
      expect(res.status).to.equal(201);
      expect(res.body.size).to.equal(1000);
    });

    it('when the file is one byte over the limit, then 403 file_too_large and nothing is stored', async () => {
      const before = await t.objects();
      const res = await uploadFile(t.server.url, key, 'big.bin', randomBytes(1001));
      expect(res.status).to.equal(403);
      expect(res.body).to.deep.equal({
        success: false,
        error: { code: 'file_too_large', message: "The file exceeds the plan's maximum file size of 1000 bytes" },
      });
      await expectNothingStored(before);
    });

    it('when a huge file streams in, then 403 arrives before the body is sent and the connection is closed', async () => {
      const before = await t.objects();
      const chunk = randomBytes(64 * 1024);
      let sent = 0;
      const result = await new Promise<{ status: number; body: string; sentAtResponse: number }>((resolve, reject) => {
        const req = request(`${t.server.url}/api/v1/files/upload`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${key}`, 'Content-Type': multipartType() },
        });
        req.on('response', (res) => {
          const sentAtResponse = sent;
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode!, body, sentAtResponse }));
        });
        req.on('error', reject);
        req.write(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="huge.bin"\r\n\r\n`);
        const pump = () => {
          // 256 MiB would be sent in full if the server read it all.
          while (sent < 256 * 1024 * 1024) {
            sent += chunk.length;
            if (!req.write(chunk)) return void req.once('drain', pump);
          }
          req.end();
        };
        pump();
      });
      expect(result.status).to.equal(403);
      expect(JSON.parse(result.body).error.code).to.equal('file_too_large');
      expect(result.sentAtResponse).to.be.lessThan(64 * 1024 * 1024);
      await expectNothingStored(before);
    });

    it('when the body has no file part, then 400 missing_file', async () => {
      const res = await upload(t.server.url, key, [{ name: 'other', content: 'x' }]);
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('missing_file');
    });

    it('when the part named file has no filename, then 400 missing_file', async () => {
      const res = await upload(t.server.url, key, [{ name: 'file', content: 'just a field' }]);
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('missing_file');
    });

    it('when there are two file parts, then 400 multiple_files and nothing is stored', async () => {
      const before = await t.objects();
      const res = await upload(t.server.url, key, [
        { name: 'file', filename: 'a.txt', content: 'aaa' },
        { name: 'file', filename: 'b.txt', content: 'bbb' },
      ]);
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('multiple_files');
      await expectNothingStored(before);
    });

    it('when a file part has another name, then 400 unexpected_file_part', async () => {
      const res = await upload(t.server.url, key, [{ name: 'document', filename: 'a.txt', content: 'a' }]);
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('unexpected_file_part');
    });

    it('when the body is not multipart, then 400 invalid_multipart', async () => {
      const res = await call(`${t.server.url}/api/v1/files/upload`, {
        method: 'POST',
        key,
        headers: { 'Content-Type': 'application/json' },
        body: '{}',
      });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('invalid_multipart');
    });

    it('when the body is sent as curl --data-binary sends it (urlencoded), then 400 invalid_multipart says uploads are multipart with a "file" part, and nothing is stored', async () => {
      const before = await t.objects();
      for (const type of ['application/x-www-form-urlencoded', undefined]) {
        const res = await call(`${t.server.url}/api/v1/files/upload`, {
          method: 'POST',
          key,
          headers: type ? { 'Content-Type': type } : {},
          body: randomBytes(200),
        });
        expect(res.status).to.equal(400);
        expect(res.body.error.code).to.equal('invalid_multipart');
        expect(res.body.error.message).to.equal(
          `Uploads are multipart/form-data with one file part named "file" (this body is ${type ?? 'without a Content-Type'}); ` +
            'with curl: -F "file=@report.pdf", not --data-binary. For resumable uploads use POST /api/v1/uploads (tus)',
        );
      }
      await expectNothingStored(before);
    });

    it('when the closing boundary is missing, then 400 and nothing is stored', async () => {
      const before = await t.objects();
      const body = multipartBody([{ name: 'file', filename: 'a.bin', content: randomBytes(100) }]);
      const truncated = body.subarray(0, body.length - `--${BOUNDARY}--\r\n`.length);
      const res = await call(`${t.server.url}/api/v1/files/upload`, {
        method: 'POST',
        key,
        headers: { 'Content-Type': multipartType() },
        body: truncated,
      });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('invalid_multipart');
      await expectNothingStored(before);
    });

    it('when the client hangs up mid-upload, then no row, no object and no temp file remain', async () => {
      const before = await t.objects();
      await new Promise<void>((resolve) => {
        const req = request(`${t.server.url}/api/v1/files/upload`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${key}`, 'Content-Type': multipartType() },
        });
        req.on('error', () => resolve());
        req.write(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="cut.bin"\r\n\r\n`);
        req.write(randomBytes(500), () => setTimeout(() => req.destroy(), 100));
        req.on('close', () => resolve());
      });
      // The server notices the hang-up asynchronously (expectNothingStored waits).
      await expectNothingStored(before);
    });

    it('when an empty file is uploaded, then it is stored with size 0', async () => {
      const res = await uploadFile(t.server.url, key, 'empty.txt', '');
      expect(res.status).to.equal(201);
      expect(res.body.size).to.equal(0);
    });

    describe('filenames', () => {
      const accepted: [string, string, string][] = [
        ['a path with slashes', 'dir/sub/name.txt', 'name.txt'],
        ['a Windows path', 'C:\\Users\\me\\name.txt', 'name.txt'],
        ['UTF-8 characters', 'résumé 履歴書.pdf', 'résumé 履歴書.pdf'],
        ['an NFD form', 'cafe\u0301.txt', 'caf\u00e9.txt'],
        ['quotes', 'say "hi".txt', 'say "hi".txt'],
        ['exactly 255 bytes', `${'é'.repeat(125)}12345`, `${'é'.repeat(125)}12345`],
      ];
      for (const [what, sent, stored] of accepted) {
        it(`when the filename has ${what}, then it is kept as ${JSON.stringify(stored)}`, async () => {
          const res = await uploadFile(t.server.url, key, sent, 'x');
          expect(res.status).to.equal(201);
          expect(res.body.filename).to.equal(stored);
          const info = await call(t.url(`/api/v1/files/${res.body.file_id}`), { key });
          expect(info.body.file.filename).to.equal(stored);
        });
      }

      const refused: [string, string][] = [
        ['a NUL byte', 'a\u0000b.txt'],
        ['a carriage return and line feed', 'a\r\nb.txt'],
        ['a tab', 'a\tb.txt'],
        ['over 255 bytes', `${'é'.repeat(126)}1234`],
        ['only a path', 'dir/'],
        ['only dots', '..'],
      ];
      for (const [what, sent] of refused) {
        it(`when the filename has ${what}, then 400 invalid_filename and nothing is stored`, async () => {
          const before = await t.objects();
          // Built by hand: header values cannot carry CR/LF through a normal client.
          const body = Buffer.concat([
            Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename*=UTF-8''${encodeURIComponent(sent)}\r\n\r\n`),
            Buffer.from('data\r\n'),
            Buffer.from(`--${BOUNDARY}--\r\n`),
          ]);
          const res = await call(`${t.server.url}/api/v1/files/upload`, {
            method: 'POST',
            key,
            headers: { 'Content-Type': multipartType() },
            body,
          });
          expect(res.status).to.equal(400);
          expect(res.body.error.code).to.equal('invalid_filename');
          await expectNothingStored(before);
        });
      }
    });

    describe('daily upload quota', () => {
      before(async () => {
        await t.plan('five-a-day', { api_access: true, requests_per_minute: 1000, requests_per_day: 10000, max_file_size: 1000, daily_uploads: 5, concurrent_uploads: 16 });
      });

      it('when 16 uploads race for a quota of 5, then exactly 5 succeed and the rest get 403 daily_upload_limit', async () => {
        const { apiKey } = await t.account('five-a-day');
        const results = await Promise.all(
          Array.from({ length: 16 }, (_, i) => uploadFile(t.server.url, apiKey, `race-${i}.txt`, `content ${i}`)),
        );
        const statuses = results.map((r) => r.status);
        expect(statuses.filter((s) => s === 201)).to.have.length(5);
        expect(statuses.filter((s) => s === 403)).to.have.length(11);
        for (const r of results.filter((r) => r.status === 403)) expect(r.body.error.code).to.equal('daily_upload_limit');
        const stats = await call(t.url('/api/v1/stats'), { key: apiKey });
        expect(stats.body.stats.total_files).to.equal(5);
      });

      it('when an upload fails, then it does not count against the quota', async () => {
        const { apiKey } = await t.account('five-a-day');
        for (let i = 0; i < 5; i++) {
          const refused = await uploadFile(t.server.url, apiKey, 'big.bin', randomBytes(1001));
          expect(refused.status).to.equal(403);
          expect(refused.body.error.code).to.equal('file_too_large');
        }
        for (let i = 0; i < 5; i++) expect((await uploadFile(t.server.url, apiKey, `ok-${i}.txt`, 'ok')).status).to.equal(201);
        const sixth = await uploadFile(t.server.url, apiKey, 'sixth.txt', 'no');
        expect(sixth.status).to.equal(403);
        expect(sixth.body.error.code).to.equal('daily_upload_limit');
      });

      it('when a file is deleted, then its upload still counts for the day', async () => {
        const { apiKey } = await t.account('five-a-day');
        const ids: number[] = [];
        for (let i = 0; i < 5; i++) ids.push((await uploadFile(t.server.url, apiKey, `f${i}.txt`, 'x')).body.file_id);
        expect((await call(t.url(`/api/v1/files/${ids[0]}`), { method: 'DELETE', key: apiKey })).status).to.equal(200);
        expect((await uploadFile(t.server.url, apiKey, 'again.txt', 'x')).status).to.equal(403);
      });
    });
  });
}
