// File requests as their owner and an outsider see them (issue 45): the
// owner's routes, the outsider's plain upload (with curl, a client others
// wrote) and its refusals, tus places, and what lands in the owner's
// account (request_id on the file, its file.uploaded event).
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { sharedServer } from '../helpers/shared.js';
import type { TestServer } from '../helpers/server.js';
import { metadata, TUS } from '../helpers/tus.js';
import { linkPath, newRequest, sendFile } from './helpers.js';

const run = promisify(execFile);

for (const backend of backends) {
  describe(`file requests (${backend})`, function () {
    this.timeout(30_000);
    let t: TestServer;
    let owner: { accountId: number; apiKey: string };
    before(async () => {
      t = await sharedServer(backend);
      owner = await t.account();
    });

    it('when the owner creates a request, then it has an unguessable upload link, its limits, and is listed and got with no files', async () => {
      const request = await newRequest(t, owner.apiKey, { title: 'Invoices', max_files: 2, max_file_size: 1000, expires_in: 3600 });
      expect(request).to.include({ title: 'Invoices', max_files: 2, max_file_size: 1000, files_received: 0, has_password: false });
      expect(request.request_id).to.match(/^req_[A-Za-z0-9_-]{16}$/);
      expect(request.upload_link).to.match(/^http:\/\/files\.test\/r\/[A-Za-z0-9_-]{22}$/);
      const list = await call(t.url('/api/v1/requests'), { key: owner.apiKey });
      expect(list.body.requests.map((r: any) => r.request_id)).to.include(request.request_id);
      const got = await call(t.url(`/api/v1/requests/${request.request_id}`), { key: owner.apiKey });
      expect(got.status).to.equal(200);
      expect(got.body.files).to.deep.equal([]);
    });

    it('when a field is unknown or out of range, then 400 invalid_file_request names it', async () => {
      for (const body of [{ max_files: 0 }, { colour: 'red' }, { max_file_size: -1 }]) {
        const res = await call(t.url('/api/v1/requests'), { method: 'POST', key: owner.apiKey, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
        expect(res.status).to.equal(400);
        expect(res.body.error.code).to.equal('invalid_file_request');
      }
    });

    it('when a title holds NUL, U+202E, CR or LF, then 400 invalid_file_request, as a filename would be refused, and nothing is made', async () => {
      const before = await t.server.db.prisma.fileRequest.count({ where: { accountId: owner.accountId } });
      for (const title of ['Invoices\u0000', 'invoice\u202Egpj.exe', 'line\r\nSet-Cookie: x=1', 'two\nlines', '\u200B', '\u0301accent first']) {
        const res = await call(t.url('/api/v1/requests'), { method: 'POST', key: owner.apiKey, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ title }) });
        expect(res.status, `${JSON.stringify(title)}: ${res.text}`).to.equal(400);
        expect(res.body.error.code).to.equal('invalid_file_request');
        expect(res.body.error.message).to.match(/^Invalid file request: title: /);
      }
      expect(await t.server.db.prisma.fileRequest.count({ where: { accountId: owner.accountId } })).to.equal(before);
      // Ordinary text with slashes, accents and emoji stays as written.
      expect((await newRequest(t, owner.apiKey, { title: 'Q3 / Q4 reçus 📄' })).title).to.equal('Q3 / Q4 reçus 📄');
    });

    it('when an outsider sends a file with curl, then the answer is a receipt and the file is the owner\'s, with request_id, and counted in files_received', async () => {
      const request = await newRequest(t, owner.apiKey, { title: 'Photos' });
      const dir = await mkdtemp(join(tmpdir(), 'dropstream-req-'));
      try {
        await writeFile(join(dir, 'photo.jpg'), 'not really a photo');
        const { stdout } = await run('curl', ['-sS', '-F', `file=@${join(dir, 'photo.jpg')}`, t.url(`${linkPath(request)}/files`)]);
        const receipt = JSON.parse(stdout);
        expect(receipt).to.deep.equal({ success: true, filename: 'photo.jpg', size: 18 });
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
      const got = await call(t.url(`/api/v1/requests/${request.request_id}`), { key: owner.apiKey });
      expect(got.body.request.files_received).to.equal(1);
      expect(got.body.files).to.have.length(1);
      expect(got.body.files[0]).to.include({ filename: 'photo.jpg', size: 18, request_id: request.request_id });
      const file = await call(t.url(`/api/v1/files/${got.body.files[0].file_id}`), { key: owner.apiKey });
      expect(file.body.file.request_id).to.equal(request.request_id);
    });

    it('when the request is closed, unknown, another account\'s or expired, then 404 request_not_found or 410 request_expired, and nothing is stored', async () => {
      const request = await newRequest(t, owner.apiKey, {});
      const other = await t.account();
      expect((await call(t.url(`/api/v1/requests/${request.request_id}`), { key: other.apiKey })).body.error.code).to.equal('request_not_found');
      expect((await call(t.url(`/api/v1/requests/${request.request_id}`), { method: 'DELETE', key: other.apiKey })).status).to.equal(404);
      const closed = await call(t.url(`/api/v1/requests/${request.request_id}`), { method: 'DELETE', key: owner.apiKey });
      expect(closed.status).to.equal(200);
      const refused = await sendFile(t.server.url, request, 'a.txt', 'a');
      expect(refused.status).to.equal(404);
      expect(refused.body.error.code).to.equal('request_not_found');
      expect((await sendFile(t.server.url, { upload_link: 'http://files.test/r/AAAAAAAAAAAAAAAAAAAAAA' }, 'a.txt', 'a')).status).to.equal(404);
      const expiring = await newRequest(t, owner.apiKey, { expires_in: 1 });
      await t.server.db.prisma.fileRequest.update({ where: { id: expiring.request_id }, data: { expiresAt: new Date(Date.now() - 1000) } });
      const late = await sendFile(t.server.url, expiring, 'a.txt', 'a');
      expect(late.status).to.equal(410);
      expect(late.body.error.code).to.equal('request_expired');
      expect(await t.server.db.prisma.file.count({ where: { accountId: owner.accountId, requestId: { in: [request.request_id, expiring.request_id] } } })).to.equal(0);
    });

    it('when a browser opens the link of a closed, expired or full request, then a page says why with 404 or 410, and curl still gets the JSON error', async () => {
      const html = { Accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };
      const page = async (request: { upload_link: string }, headers: Record<string, string> = html) => {
        const res = await fetch(t.url(linkPath(request)), { headers });
        return { status: res.status, type: res.headers.get('content-type') ?? '', text: await res.text() };
      };
      const closed = await newRequest(t, owner.apiKey, {});
      await call(t.url(`/api/v1/requests/${closed.request_id}`), { method: 'DELETE', key: owner.apiKey });
      const expired = await newRequest(t, owner.apiKey, { expires_in: 60 });
      await t.server.db.prisma.fileRequest.update({ where: { id: expired.request_id }, data: { expiresAt: new Date(Date.now() - 1000) } });
      const full = await newRequest(t, owner.apiKey, { max_files: 1 });
      expect((await sendFile(t.server.url, full, 'only.txt', 'only')).status).to.equal(201);
      const open = await newRequest(t, owner.apiKey, { max_files: 2 });

      const seen = { closed: await page(closed), expired: await page(expired), full: await page(full) };
      expect(seen.closed).to.include({ status: 404, type: 'text/html; charset=utf-8' });
      expect(seen.closed.text).to.include('No such file request, or it was closed.');
      expect(seen.expired).to.include({ status: 410, type: 'text/html; charset=utf-8' });
      expect(seen.expired.text).to.include('This file request has expired.');
      expect(seen.full).to.include({ status: 410, type: 'text/html; charset=utf-8' });
      expect(seen.full.text).to.include('This file request has received its 1 file.');
      // An open request still gets its upload page.
      expect((await page(open)).text).to.include('id="request"');
      // curl sends Accept: */*, and keeps the contract's JSON.
      const json = await page(expired, { Accept: '*/*' });
      expect(json.status).to.equal(410);
      expect(JSON.parse(json.text).error.code).to.equal('request_expired');
    });

    it('when a file is larger than the request\'s max_file_size, then file_too_large while streaming, and the place is free again', async () => {
      const request = await newRequest(t, owner.apiKey, { max_files: 1, max_file_size: 100 });
      const big = await sendFile(t.server.url, request, 'big.bin', Buffer.alloc(5000));
      expect(big.body.error.code).to.equal('file_too_large');
      expect(big.body.error.message).to.include('100 bytes');
      expect((await sendFile(t.server.url, request, 'small.bin', Buffer.alloc(100))).status).to.equal(201);
    });

    it('when the request has a password, then 401 with WWW-Authenticate without it or with a wrong one, 201 with it', async () => {
      const request = await newRequest(t, owner.apiKey, { password: 'open sesame' });
      expect(request.has_password).to.equal(true);
      const none = await sendFile(t.server.url, request, 'a.txt', 'a');
      expect(none.status).to.equal(401);
      expect(none.body.error.code).to.equal('password_required');
      expect(none.headers.get('www-authenticate')).to.match(/^Basic/);
      const basic = (p: string) => ({ Authorization: `Basic ${Buffer.from(`:${p}`).toString('base64')}` });
      expect((await sendFile(t.server.url, request, 'a.txt', 'a', basic('wrong'))).body.error.code).to.equal('wrong_password');
      expect((await sendFile(t.server.url, request, 'a.txt', 'a', basic('open sesame'))).status).to.equal(201);
    });

    it('when tus uploads are created through the link, then each takes a place at once, a termination gives it back, and the owner\'s upload list is not reachable', async () => {
      const request = await newRequest(t, owner.apiKey, { max_files: 2 });
      const base = t.url(`${linkPath(request)}/uploads`);
      const create = () => call(base, { method: 'POST', headers: { ...TUS, 'Upload-Length': '10', 'Upload-Metadata': metadata({ filename: 'x.bin' }) } });
      const first = await create();
      const second = await create();
      expect([first.status, second.status]).to.deep.equal([201, 201]);
      expect(first.headers.get('location')).to.match(new RegExp(`^${linkPath(request)}/uploads/`));
      const third = await create();
      expect(third.status).to.equal(410);
      expect(third.body.error.code).to.equal('request_full');
      // A plain upload finds the request full too.
      expect((await sendFile(t.server.url, request, 'a.txt', 'a')).body.error.code).to.equal('request_full');
      expect((await call(t.server.url + first.headers.get('location'), { method: 'DELETE', headers: TUS })).status).to.equal(204);
      expect((await create()).status).to.equal(201);
      expect((await call(base, { headers: TUS })).status).to.be.oneOf([404, 405]);
      // Another request's link does not reach this request's upload.
      const stranger = await newRequest(t, owner.apiKey, {});
      const foreign = second.headers.get('location')!.replace(linkPath(request), linkPath(stranger));
      expect((await call(t.server.url + foreign, { method: 'HEAD', headers: TUS })).status).to.equal(404);
    });

    it('when a file arrives through a request, then its file.uploaded webhook message carries the request_id', async () => {
      const account = await t.account();
      const hook = await call(t.url('/api/v1/webhooks'), { method: 'POST', key: account.apiKey, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ url: 'https://receiver.invalid/hook', events: ['file.uploaded'] }) });
      expect(hook.status).to.equal(201);
      const request = await newRequest(t, account.apiKey, {});
      expect((await sendFile(t.server.url, request, 'w.txt', 'webhook')).status).to.equal(201);
      const messages = await t.server.db.prisma.webhookMessage.findMany({ where: { endpointId: hook.body.webhook.webhook_id } });
      expect(messages).to.have.length(1);
      expect(JSON.parse(messages[0]!.body).data).to.include({ filename: 'w.txt', request_id: request.request_id });
    });
  });
}
