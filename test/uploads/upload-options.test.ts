// Upload options (issue 23): expires_in, max_downloads and password, as
// multipart text fields before the file part and as tus Upload-Metadata
// keys; expires_at in the file JSON (never in the upload answer: the spec's key set); bad values and late fields refused
// with nothing kept; the password stored only as a salted hash, never logged.
import { expect } from 'chai';
import { accountState } from '../helpers/account-state.js';
import { call, upload, uploadFile } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { captureLog, type CapturedLog } from '../helpers/log-capture.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { create, metadata, patch, uploadUrl } from '../helpers/tus.js';

const SPEC_DATE = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;
/** A spec date (UTC) as milliseconds. */
const parseSpecDate = (text: string) => Date.parse(`${text.replace(' ', 'T')}Z`);

for (const backend of backends) {
  describe(`upload options (${backend})`, function () {
    this.timeout(60_000);
    let t: TestServer;
    let log: CapturedLog;
    let key: string;
    let accountId: number;

    before(async () => {
      log = captureLog('trace');
      t = await startTestServer(backend, {}, log.logger);
    });
    after(() => t?.close());
    beforeEach(async () => {
      ({ apiKey: key, accountId } = await t.account());
    });

    const primaryLinkOf = (fileId: number) => t.server.db.prisma.link.findFirstOrThrow({ where: { fileId } });

    it('when the fields come before the file, then the file expires when asked, and its primary link has the download limit and a hashed password', async () => {
      const started = Date.now();
      const res = await upload(t.server.url, key, [
        { name: 'expires_in', content: '3600' },
        { name: 'max_downloads', content: '3' },
        { name: 'password', content: 'open sesame' },
        { name: 'file', filename: 'opts.txt', content: 'with options' },
      ]);
      expect(res.status).to.equal(201);
      // The spec's key set, options or not (issue 50): the expiry is read from the file.
      expect(Object.keys(res.body)).to.deep.equal(['success', 'file_id', 'public_link', 'size', 'filename']);
      const info = await call(t.url(`/api/v1/files/${res.body.file_id}`), { key });
      expect(info.body.file.expires_at).to.match(SPEC_DATE);
      const expires = parseSpecDate(info.body.file.expires_at);
      expect(expires).to.be.within(Math.floor(started / 1000) * 1000 + 3600_000, Date.now() + 3600_000);
      const list = await call(t.url('/api/v1/files'), { key });
      expect(list.body.files[0].expires_at).to.equal(info.body.file.expires_at);

      const link = await primaryLinkOf(res.body.file_id);
      expect(link.maxDownloads).to.equal(3);
      expect(link.expiresAt).to.equal(null); // the file's expiry covers it
      expect(link.passwordHash).to.match(/^scrypt\$/);
      expect(link.passwordHash).to.not.include('open sesame');
    });

    it('when no option is sent, then expires_at is null in the file and the list, and the link has no rules', async () => {
      const res = await uploadFile(t.server.url, key, 'plain.txt', 'plain');
      expect((await call(t.url(`/api/v1/files/${res.body.file_id}`), { key })).body.file.expires_at).to.equal(null);
      expect((await call(t.url('/api/v1/files'), { key })).body.files[0].expires_at).to.equal(null);
      const link = await primaryLinkOf(res.body.file_id);
      expect([link.maxDownloads, link.passwordHash, link.expiresAt]).to.deep.equal([null, null, null]);
    });

    it('when other fields come before the file, then they are ignored as before', async () => {
      const res = await upload(t.server.url, key, [{ name: 'title', content: 'x' }, { name: 'file', filename: 'a.txt', content: 'a' }]);
      expect(res.status).to.equal(201);
    });

    const refusals: Array<[string, string, string]> = [
      ['expires_in', '0', 'invalid_expires_in'],
      ['expires_in', '-5', 'invalid_expires_in'],
      ['expires_in', '1.5', 'invalid_expires_in'],
      ['expires_in', 'soon', 'invalid_expires_in'],
      ['expires_in', '2147483648', 'invalid_expires_in'],
      ['max_downloads', '0', 'invalid_max_downloads'],
      ['max_downloads', ' 2', 'invalid_max_downloads'],
      ['password', '', 'invalid_password'],
      ['password', 'x'.repeat(257), 'invalid_password'],
    ];
    for (const [name, value, code] of refusals) {
      it(`when ${name} is ${JSON.stringify(value.length > 20 ? `${value.slice(0, 5)}... (${value.length})` : value)}, then 400 ${code} and nothing is kept`, async () => {
        const objects = (await t.objects()).length;
        const res = await upload(t.server.url, key, [{ name, content: value }, { name: 'file', filename: 'bad.txt', content: 'nope' }]);
        expect(res.status).to.equal(400);
        expect(res.body.error.code).to.equal(code);
        expect(await accountState(t, accountId)).to.deep.equal({ rows: 0, pending: 0, quota: 0 });
        expect(await t.objects()).to.have.length(objects);
      });
    }

    it('when an option is sent twice, then 400 for it', async () => {
      const res = await upload(t.server.url, key, [
        { name: 'max_downloads', content: '1' },
        { name: 'max_downloads', content: '2' },
        { name: 'file', filename: 'twice.txt', content: 'x' },
      ]);
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('invalid_max_downloads');
    });

    it('when a password of 256 characters (not bytes) is sent, then it is accepted', async () => {
      const res = await upload(t.server.url, key, [{ name: 'password', content: 'é'.repeat(256) }, { name: 'file', filename: 'long.txt', content: 'x' }]);
      expect(res.status).to.equal(201);
    });

    it('when a field comes after the file part, then 400 field_after_file and nothing is kept', async () => {
      const res = await upload(t.server.url, key, [{ name: 'file', filename: 'late.txt', content: 'x'.repeat(5000) }, { name: 'max_downloads', content: '1' }]);
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('field_after_file');
      expect(await accountState(t, accountId)).to.deep.equal({ rows: 0, pending: 0, quota: 0 });
    });

    it('when a resumable upload carries the options in Upload-Metadata, then the file it becomes has them', async () => {
      const res = await create(t.server.url, key, {
        length: 5,
        headers: { 'Upload-Metadata': metadata({ filename: 'tus.txt', expires_in: '60', max_downloads: '2', password: 'tus secret' }) },
      });
      expect(res.status).to.equal(201);
      const done = await patch(uploadUrl(t.server.url, res), key, 0, Buffer.from('hello'));
      expect(done.status).to.equal(204);
      const fileId = Number(done.headers.get('dropstream-file-id'));
      const info = await call(t.url(`/api/v1/files/${fileId}`), { key });
      expect(parseSpecDate(info.body.file.expires_at) - parseSpecDate(info.body.file.upload_date)).to.be.within(59_000, 61_000);
      const link = await primaryLinkOf(fileId);
      expect(link.maxDownloads).to.equal(2);
      expect(link.passwordHash).to.match(/^scrypt\$/);
      const row = await t.server.db.prisma.resumableUpload.findFirstOrThrow({ where: { accountId } });
      expect(JSON.stringify(row, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).to.not.include('tus secret');
      expect(row.passwordHash).to.match(/^scrypt\$/);
    });

    it('when a resumable upload has a bad option, then 400 before anything is created or a slot taken', async () => {
      const res = await create(t.server.url, key, { length: 5, headers: { 'Upload-Metadata': metadata({ filename: 'tus.txt', expires_in: '0' }) } });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('invalid_expires_in');
      expect(await t.server.db.prisma.resumableUpload.count({ where: { accountId } })).to.equal(0);
      expect(await accountState(t, accountId)).to.deep.equal({ rows: 0, pending: 0, quota: 0 });
    });

    it('when passwords were sent (multipart and tus), then no log line at trace level holds them', () => {
      const text = log.raw.join('\n');
      expect(text).to.include('request'); // the log was written
      for (const secret of ['open sesame', 'tus secret', Buffer.from('tus secret').toString('base64')]) expect(text).to.not.include(secret);
    });
  });
}
