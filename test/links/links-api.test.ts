// The links API (issue 23): GET and POST /api/v1/files/{file_id}/links and
// DELETE /api/v1/files/{file_id}/links/{link_id}, as a client sees them:
// the primary link listed, links made with their own rules, revocation
// (at once, on another instance too) and rotation of the primary link, and
// the same key, plan and rate limits as every v1 route.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { call, upload, uploadFile } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestServer, startTwoInstances, type TestServer } from '../helpers/server.js';

const run = promisify(execFile);
const LINK_FIELDS = ['download_count', 'expires_at', 'link_id', 'max_downloads', 'password_protected', 'primary', 'public_link'];
const SPEC_DATE = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;

/** A download's status, its body read (curl, with any extra arguments). */
async function downloadStatus(url: string, args: string[] = []): Promise<number> {
  const { stdout } = await run('curl', ['-sS', '-o', '/dev/null', '-w', '%{http_code}', ...args, url]);
  return Number(stdout);
}

const json = (body: unknown) => ({ method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

for (const backend of backends) {
  describe(`links API (${backend})`, function () {
    this.timeout(60_000);
    let t: TestServer;
    let key: string;
    let file: { file_id: number; public_link: string };
    const links = (id = file.file_id) => t.url(`/api/v1/files/${id}/links`);

    before(async () => {
      t = await startTestServer(backend);
    });
    after(() => t?.close());
    beforeEach(async () => {
      ({ apiKey: key } = await t.account());
      file = (await uploadFile(t.server.url, key, 'shared.txt', 'shared content')).body;
    });

    it('when a file\'s links are listed, then its public_link is there as the primary link, with every Link field', async () => {
      const res = await call(links(), { key });
      expect(res.status).to.equal(200);
      expect(res.body.success).to.equal(true);
      expect(res.body.links).to.have.length(1);
      const [primary] = res.body.links;
      expect(Object.keys(primary).sort()).to.deep.equal(LINK_FIELDS);
      expect(primary).to.include({ public_link: file.public_link, primary: true, expires_at: null, max_downloads: null, download_count: 0, password_protected: false });
    });

    it('when a link is made with options, then 201 with its rules, it works with its password, and the list shows it after the primary', async () => {
      const res = await call(links(), { ...json({ expires_in: 3600, max_downloads: 2, password: 'hunter2' }), key });
      expect(res.status).to.equal(201);
      const { link } = res.body;
      expect(Object.keys(link).sort()).to.deep.equal(LINK_FIELDS);
      expect(link).to.include({ primary: false, max_downloads: 2, download_count: 0, password_protected: true });
      expect(link.expires_at).to.match(SPEC_DATE);
      expect(link.public_link).to.not.equal(file.public_link);
      expect(await downloadStatus(t.url(link.public_link))).to.equal(401);
      expect(await downloadStatus(t.url(link.public_link), ['-u', ':hunter2'])).to.equal(200);
      // A download is counted just after its last byte left: the list may be read before that.
      const listed = await eventually(async () => (await call(links(), { key })).body.links, (l) => l[1]?.download_count === 1);
      expect(listed.map((l: { link_id: string }) => l.link_id)).to.deep.equal([listed[0].link_id, link.link_id]);
      expect(listed[1].download_count).to.equal(1);
    });

    it('when a link expires before its file, or its file first, then expires_at is the earlier of the two', async () => {
      const uploaded = (await uploadFileWith(t, key, { expires_in: '600' })).body;
      // The upload answer has the spec's five fields only: the file's expiry is read from its own resource.
      const expiring = (await call(t.url(`/api/v1/files/${uploaded.file_id}`), { key })).body.file;
      expect(expiring.expires_at).to.match(SPEC_DATE);
      const longer = (await call(links(expiring.file_id), { ...json({ expires_in: 7200 }), key })).body.link;
      expect(longer.expires_at).to.equal(expiring.expires_at);
      const shorter = (await call(links(expiring.file_id), { ...json({ expires_in: 60 }), key })).body.link;
      expect(shorter.expires_at < expiring.expires_at).to.equal(true);
    });

    it('when a link is made with no body or {}, then it is a plain link', async () => {
      const bare = await call(links(), { method: 'POST', key });
      expect(bare.status).to.equal(201);
      expect(bare.body.link).to.include({ max_downloads: null, password_protected: false, expires_at: null });
      expect((await call(links(), { ...json({}), key })).status).to.equal(201);
      expect(await downloadStatus(t.url(bare.body.link.public_link))).to.equal(200);
    });

    const refusals: Array<[string, string | unknown, string]> = [
      ['expires_in 0', { expires_in: 0 }, 'invalid_expires_in'],
      ['expires_in 1.5', { expires_in: 1.5 }, 'invalid_expires_in'],
      ['expires_in as text', { expires_in: '60' }, 'invalid_expires_in'],
      ['max_downloads -1', { max_downloads: -1 }, 'invalid_max_downloads'],
      ['an empty password', { password: '' }, 'invalid_password'],
      ['a password that is a number', { password: 1234 }, 'invalid_password'],
      ['an unknown field', { expires: 60 }, 'unknown_field'],
      ['an array', [1], 'invalid_json'],
      ['broken JSON', '{"expires_in":', 'invalid_json'],
    ];
    for (const [what, body, code] of refusals) {
      it(`when a new link's body has ${what}, then 400 ${code} and no link is made`, async () => {
        const res = await call(links(), { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body), key });
        expect(res.status).to.equal(400);
        expect(res.body.error.code).to.equal(code);
        expect((await call(links(), { key })).body.links).to.have.length(1);
      });
    }

    it('when another account, or no key, asks for a file\'s links, then 404 file_not_found, or 401', async () => {
      const other = await t.account();
      expect((await call(links(), { key: other.apiKey })).body.error.code).to.equal('file_not_found');
      expect((await call(links(), { ...json({}), key: other.apiKey })).status).to.equal(404);
      const [primary] = (await call(links(), { key })).body.links;
      const del = await call(`${links()}/${primary.link_id}`, { method: 'DELETE', key: other.apiKey });
      expect(del.status).to.equal(404);
      expect((await call(links())).status).to.equal(401);
      expect((await call(t.url('/api/v1/files/abc/links'), { key })).body.error.code).to.equal('invalid_file_id');
    });

    it('when a link is revoked, then its URL answers 404 at once, the list drops it, and revoking it again is link_not_found', async () => {
      const { link } = (await call(links(), { ...json({}), key })).body;
      expect(await downloadStatus(t.url(link.public_link))).to.equal(200);
      const res = await call(`${links()}/${link.link_id}`, { method: 'DELETE', key });
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal({ success: true, message: 'Link revoked' });
      expect(await downloadStatus(t.url(link.public_link))).to.equal(404);
      expect((await call(links(), { key })).body.links).to.have.length(1);
      const again = await call(`${links()}/${link.link_id}`, { method: 'DELETE', key });
      expect([again.status, again.body.error.code]).to.deep.equal([404, 'link_not_found']);
      expect((await call(`${links()}/not-a-link`, { method: 'DELETE', key })).body.error.code).to.equal('link_not_found');
      expect(await downloadStatus(t.url(file.public_link))).to.equal(200);
    });

    it('when the primary link is revoked, then the answer carries the fresh primary link, the file\'s public_link shows it, and the old URL is 404', async () => {
      const [primary] = (await call(links(), { key })).body.links;
      const res = await call(`${links()}/${primary.link_id}`, { method: 'DELETE', key });
      expect(res.body.message).to.equal('Link revoked; the file has a new primary link');
      const info = (await call(t.url(`/api/v1/files/${file.file_id}`), { key })).body.file;
      expect(info.public_link).to.not.equal(file.public_link);
      const [fresh] = (await call(links(), { key })).body.links;
      expect(fresh).to.include({ primary: true, public_link: info.public_link, download_count: 0 });
      expect(res.body).to.deep.equal({ success: true, message: 'Link revoked; the file has a new primary link', link: fresh });
      expect(fresh.link_id).to.not.equal(primary.link_id);
      expect(await downloadStatus(t.url(file.public_link))).to.equal(404);
      expect(await downloadStatus(t.url(info.public_link))).to.equal(200);
    });

    it('when downloads go through two links, then each link counts its own, and the file\'s download_count counts them all', async () => {
      const { link } = (await call(links(), { ...json({}), key })).body;
      for (const url of [file.public_link, link.public_link, link.public_link]) expect(await downloadStatus(t.url(url))).to.equal(200);
      // Counted just after the last byte.
      const counts = async () => ((await call(links(), { key })).body.links as { download_count: number }[]).map((l) => l.download_count);
      expect(await eventually(counts, (c) => c[0] === 1 && c[1] === 2)).to.deep.equal([1, 2]);
      expect((await call(t.url(`/api/v1/files/${file.file_id}`), { key })).body.file.download_count).to.equal(3);
    });

    it('when a plan allows 3 requests a minute, then link requests count like every v1 route and the fourth is 429', async () => {
      await t.plan('links-three', { api_access: true, requests_per_minute: 3, requests_per_day: 100, max_file_size: 1000, daily_uploads: 10 });
      const limited = await t.account('links-three');
      const own = (await uploadFile(t.server.url, limited.apiKey, 'a.txt', 'a')).body; // 1
      expect((await call(links(own.file_id), { key: limited.apiKey })).status).to.equal(200); // 2
      expect((await call(links(own.file_id), { ...json({}), key: limited.apiKey })).status).to.equal(201); // 3
      const refused = await call(links(own.file_id), { key: limited.apiKey });
      expect([refused.status, refused.body.error.code]).to.deep.equal([429, 'rate_limited']);
    });
  });
}

/** Uploads a small file with upload options. */
function uploadFileWith(t: TestServer, key: string, options: Record<string, string>) {
  return upload(t.server.url, key, [...Object.entries(options).map(([name, content]) => ({ name, content })), { name: 'file', filename: 'x.txt', content: 'x' }]);
}

if (backends.includes('postgresql')) {
  describe('links API across two instances', function () {
    this.timeout(60_000);
    it('when a link is revoked on instance A, then instance B answers 404 for it at once', async () => {
      const two = await startTwoInstances();
      try {
        const { apiKey } = await two.a.account();
        const file = (await uploadFile(two.a.server.url, apiKey, 'f.txt', 'f')).body;
        const { link } = (await call(two.a.url(`/api/v1/files/${file.file_id}/links`), { ...json({}), key: apiKey })).body;
        // B's store is its own folder: a HEAD shows the link resolves there without reading the object.
        expect((await fetch(two.b.url(link.public_link), { method: 'HEAD' })).status).to.equal(200);
        expect((await call(two.a.url(`/api/v1/files/${file.file_id}/links/${link.link_id}`), { method: 'DELETE', key: apiKey })).status).to.equal(200);
        expect((await fetch(two.b.url(link.public_link), { method: 'HEAD' })).status).to.equal(404);
      } finally {
        await two.close();
      }
    });
  });
}
