// What bounds a file request beyond max_files (issue 45): a tus upload
// through it that expires gives its place back (the sweep), a plain upload
// that crashes before its commit holds its place until swept, and one
// address cannot go past the per-address limits of /r/ routes.
import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { buildTestServer, type BuiltTestServer } from '../helpers/built-server.js';
import { metadata, TUS } from '../helpers/tus.js';
import { linkPath, newRequest, sendFile } from './helpers.js';

describe('file requests: places given back, and per-address limits', function () {
  this.timeout(30_000);
  let t: BuiltTestServer;
  before(async () => {
    t = await buildTestServer('pglite', { REQUEST_LINK_REQUESTS_PER_MINUTE: '20', REQUEST_LINK_UPLOADS_PER_HOUR: '6', GC_INTERVAL: '0', LINK_PASSWORD_FAILURE_LIMIT: '2' });
  });
  after(async () => t?.close());

  const createUpload = (request: { upload_link: string }) =>
    call(t.url(`${linkPath(request)}/uploads`), { method: 'POST', headers: { ...TUS, 'Upload-Length': '10', 'Upload-Metadata': metadata({ filename: 'x.bin' }) } });

  it('when a request takes more wrong passwords than LINK_PASSWORD_FAILURE_LIMIT, then its password is locked, right or wrong, and another request\'s is not', async () => {
    const { apiKey } = await t.account();
    const request = await newRequest(t, apiKey, { password: 'right one' });
    const other = await newRequest(t, apiKey, { password: 'right one' });
    const page = (r: { upload_link: string }, password: string) => call(t.url(linkPath(r)), { headers: { Authorization: `Basic ${Buffer.from(`:${password}`).toString('base64')}` } });
    expect((await page(request, 'wrong 1')).body.error.code).to.equal('wrong_password');
    expect((await page(request, 'wrong 2')).body.error.code).to.equal('wrong_password');
    const locked = await page(request, 'wrong 3');
    expect(locked.status).to.equal(429);
    expect(locked.body.error.code).to.equal('link_password_locked');
    expect((await page(request, 'right one')).body.error.code).to.equal('link_password_locked');
    expect((await page(other, 'right one')).status).to.equal(200);
  });

  it('when a tus upload through a full request expires unfinished and is swept, then its place comes back', async () => {
    const { apiKey } = await t.account();
    const request = await newRequest(t, apiKey, { max_files: 1 });
    const first = await createUpload(request);
    expect(first.status).to.equal(201);
    expect((await createUpload(request)).body.error.code).to.equal('request_full');
    const id = first.headers.get('location')!.split('/').pop()!;
    await t.built.db.prisma.resumableUpload.update({ where: { id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    await t.admin('POST', '/admin/gc', { grace_seconds: 0 });
    expect((await createUpload(request)).status).to.equal(201);
  });

  it('when one address starts more uploads than REQUEST_LINK_UPLOADS_PER_HOUR, then 429 request_link_limited with Retry-After, and nothing more is stored', async () => {
    const { apiKey, accountId } = await t.account();
    const request = await newRequest(t, apiKey, {});
    // The tests before started 3 uploads from this address: 3 more reach the limit of 6.
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await sendFile(t.baseUrl, request, `f${i}.txt`, 'x'));
    expect(answers.map((a) => a.status)).to.deep.equal([201, 201, 201, 429]);
    expect(answers[3]!.body.error.code).to.equal('request_link_limited');
    expect(Number(answers[3]!.headers.get('retry-after'))).to.be.above(0);
    expect(await t.built.db.prisma.file.count({ where: { accountId } })).to.equal(3);
    // The owner's own API is not the outsider's limit.
    expect((await call(t.url('/api/v1/stats'), { key: apiKey })).status).to.equal(200);
  });

  it('when one address sends more requests than REQUEST_LINK_REQUESTS_PER_MINUTE to /r/ routes, then 429 request_link_limited', async () => {
    const { apiKey } = await t.account();
    const request = await newRequest(t, apiKey, {});
    const statuses: number[] = [];
    // Earlier tests of this file sent some from this address in this minute: however many (a window may also
    // have ended meanwhile), 21 more pass the limit of 20, and from the first refusal on every one is refused.
    for (let i = 0; i < 21; i++) statuses.push((await call(t.url(linkPath(request)))).status);
    const first = statuses.indexOf(429);
    expect(first, statuses.join(' ')).to.be.within(0, 20);
    expect(statuses.slice(0, first).every((s) => s === 200)).to.equal(true);
    expect(statuses.slice(first).every((s) => s === 429)).to.equal(true);
  });
});
