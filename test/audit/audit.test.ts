// The audit trail (issue 57): every change to an account has its row, written
// with the fact, naming the key or the file request link that made it, with
// the client address truncated; GET /api/v1/audit pages and filters it; the
// sweep prunes it after AUDIT_RETENTION_DAYS.
import { expect } from 'chai';
import { truncateAddress } from '../../src/audit/actor.js';
import { call, uploadFile } from '../helpers/client.js';
import { buildTestServer, type BuiltTestServer } from '../helpers/built-server.js';
import { create, patch, uploadUrl } from '../helpers/tus.js';
import { eventually } from '../helpers/raw-upload.js';
import { newRequest, sendFile } from '../requests/helpers.js';

const json = (key: string, method: string, body?: unknown) => ({ method, key, headers: { 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });

describe('the audit trail', () => {
  let t: BuiltTestServer;
  before(async () => {
    t = await buildTestServer('pglite');
  });
  after(() => t?.close());

  const events = async (key: string, query = '') => {
    const res = await call(t.url(`/api/v1/audit${query}`), { key });
    expect(res.status, res.text).to.equal(200);
    return res.body.events as Array<Record<string, unknown>>;
  };

  it('when client addresses are kept, then IPv4 is its /24 and IPv6 its /48 (an IPv4-mapped one as IPv4), or whole with AUDIT_FULL_ADDRESSES', () => {
    expect(truncateAddress('203.0.113.77', false)).to.equal('203.0.113.0/24');
    expect(truncateAddress('2001:db8:1234:5678::1', false)).to.equal('2001:db8:1234::/48');
    expect(truncateAddress('::ffff:198.51.100.9', false)).to.equal('198.51.100.0/24');
    expect(truncateAddress('2001:db8:1234:5678::1', true)).to.equal('2001:db8:1234:5678::1');
    expect(truncateAddress('not an address', false)).to.equal(null);
  });

  it('when an owner\'s keys and an outsider change the account, then each change has one row naming the key or the request link, newest first', async () => {
    const { accountId, apiKey: owner } = await t.account();
    const made = await call(t.url('/api/v1/keys'), json(owner, 'POST', { name: 'CI', scopes: ['files:write', 'files:delete', 'links:write'] }));
    const ci = made.body.key;
    const file = (await uploadFile(t.baseUrl, ci.api_key, 'a.txt', 'a')).body;
    const tus = uploadUrl(t.baseUrl, await create(t.baseUrl, ci.api_key, { length: 2, filename: 'b.bin' }));
    expect((await patch(tus, ci.api_key, 0, Buffer.from('bb'))).status).to.equal(204);
    const link = (await call(t.url(`/api/v1/files/${file.file_id}/links`), json(ci.api_key, 'POST', {}))).body.link;
    expect((await call(t.url(`/api/v1/files/${file.file_id}/links/${link.link_id}`), { method: 'DELETE', key: ci.api_key })).status).to.equal(200);
    const request = await newRequest(t, owner);
    expect((await sendFile(t.baseUrl, request, 'outsider.txt', 'o')).status).to.equal(201);
    expect((await call(t.url(`/api/v1/requests/${request.request_id}`), { method: 'DELETE', key: owner })).status).to.equal(200);
    const hook = (await call(t.url('/api/v1/webhooks'), json(owner, 'POST', { url: 'https://example.com/h' }))).body.webhook;
    expect((await call(t.url(`/api/v1/webhooks/${hook.webhook_id}/rotate-secret`), { method: 'POST', key: owner })).status).to.equal(200);
    expect((await call(t.url(`/api/v1/webhooks/${hook.webhook_id}`), { method: 'DELETE', key: owner })).status).to.equal(200);
    expect((await call(t.url(`/api/v1/files/${file.file_id}`), { method: 'DELETE', key: ci.api_key })).status).to.equal(200);
    await t.admin('PATCH', `/admin/accounts/${accountId}`, { plan: 'roomy' });
    expect((await call(t.url(`/api/v1/keys/${ci.key_id}`), { method: 'DELETE', key: owner })).status).to.equal(200);

    const trail = (await events(owner, '?limit=100')).reverse();
    expect(trail.map((e) => e.action)).to.deep.equal([
      'key.created', 'file.uploaded', 'file.uploaded', 'link.created', 'link.revoked', 'request.opened', 'file.uploaded', 'request.closed',
      'webhook.created', 'webhook.secret_rotated', 'webhook.deleted', 'file.deleted', 'plan.changed', 'key.revoked',
    ]);
    const byCi = { actor: 'key', key_id: ci.key_id, key_name: 'CI', request_id: null, client_address: '127.0.0.0/24' };
    expect(trail[1]).to.deep.include({ ...byCi, subject: String(file.file_id) });
    expect(trail[3]).to.deep.include({ ...byCi, subject: link.link_id });
    expect(trail[6]).to.deep.include({ actor: 'request', key_id: null, request_id: request.request_id, client_address: '127.0.0.0/24' });
    expect(trail[0]).to.deep.include({ actor: 'key', key_name: null, subject: ci.key_id });
    expect(trail[9]).to.deep.include({ actor: 'key', subject: hook.webhook_id });
    expect(trail[12]).to.deep.include({ actor: 'operator', subject: 'roomy', key_id: null });
    expect(trail[13]).to.deep.include({ action: 'key.revoked', subject: ci.key_id });
  });

  it('when the trail is asked for one action or a time window, page by page, then only those rows come, with the list\'s pagination', async () => {
    const { apiKey } = await t.account();
    for (let i = 0; i < 3; i++) expect((await uploadFile(t.baseUrl, apiKey, `${i}.txt`, 'x')).status).to.equal(201);
    const res = await call(t.url('/api/v1/audit?action=file.uploaded&limit=2&page=2'), { key: apiKey });
    expect(res.body.pagination).to.deep.equal({ page: 2, limit: 2, total: 3, pages: 2 });
    expect(res.body.events).to.have.length(1);
    expect(await events(apiKey, '?action=key.created')).to.deep.equal([]);
    expect(await events(apiKey, '?until=2000-01-01')).to.deep.equal([]);
    expect(await events(apiKey, `?since=${new Date(Date.now() - 60_000).toISOString()}`)).to.have.length(3);
    expect((await call(t.url('/api/v1/audit?action=file.eaten'), { key: apiKey })).body.error.code).to.equal('invalid_parameter');
    expect((await call(t.url('/api/v1/audit?since=yesterday'), { key: apiKey })).body.error.code).to.equal('invalid_parameter');
  });

  it('when files are uploaded and deleted at once, then the rows match the facts: every file has its upload row, every delete its row, and no row names a fact that did not happen', async () => {
    const { accountId, apiKey } = await t.account();
    const uploads = await Promise.all(Array.from({ length: 16 }, (_, i) => uploadFile(t.baseUrl, apiKey, `c${i}.txt`, 'c')));
    const ids = uploads.map((u) => u.body.file_id as number);
    const deletes = await Promise.all(ids.slice(0, 8).flatMap((id) => [1, 2].map(() => call(t.url(`/api/v1/files/${id}`), { method: 'DELETE', key: apiKey }))));
    expect(deletes.filter((d) => d.status === 200)).to.have.length(8); // each file deleted once; its second delete is 404
    const prisma = t.built.db.prisma;
    const files = (await prisma.file.findMany({ where: { accountId }, select: { id: true } })).map((f) => String(f.id));
    const rows = await prisma.auditEvent.findMany({ where: { accountId }, select: { action: true, subject: true } });
    const uploaded = rows.filter((r) => r.action === 'file.uploaded').map((r) => r.subject).sort();
    const deleted = rows.filter((r) => r.action === 'file.deleted').map((r) => r.subject).sort();
    expect(uploaded).to.deep.equal(ids.map(String).sort());
    expect(deleted).to.deep.equal(ids.slice(0, 8).map(String).sort());
    expect([...files].sort()).to.deep.equal(ids.slice(8).map(String).sort());
  });

  it('when the sweep removes a file past its expiry, then its file.deleted row is written with it, by the system', async () => {
    const { accountId, apiKey } = await t.account();
    const up = await uploadFile(t.baseUrl, apiKey, 'expiring.txt', 'e');
    expect(up.status).to.equal(201);
    const prisma = t.built.db.prisma;
    await prisma.file.update({ where: { id: up.body.file_id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    await t.admin('POST', '/admin/gc', {});
    expect(await prisma.file.findUnique({ where: { id: up.body.file_id } })).to.equal(null);
    const rows = await prisma.auditEvent.findMany({ where: { accountId, action: 'file.deleted' }, select: { subject: true, actor: true } });
    expect(rows).to.deep.equal([{ subject: String(up.body.file_id), actor: 'system' }]);
  });

  it('when the sweep runs, then audit rows older than AUDIT_RETENTION_DAYS (365) go and newer ones stay', async () => {
    const { accountId, apiKey } = await t.account();
    expect((await uploadFile(t.baseUrl, apiKey, 'kept.txt', 'k')).status).to.equal(201);
    const old = new Date(Date.now() - 366 * 86_400_000);
    await t.built.db.prisma.auditEvent.create({ data: { accountId, action: 'file.uploaded', subject: '1', actor: 'key', createdAt: old } });
    expect(await events(apiKey)).to.have.length(2);
    await t.admin('POST', '/admin/gc', {});
    const left = await events(apiKey);
    expect(left.map((e) => e.action)).to.deep.equal(['file.uploaded']);
    expect(left[0]!.created_at).to.not.equal(old.toISOString().slice(0, 19).replace('T', ' '));
  });

  it('when AUDIT_DOWNLOADS is on, then each complete download leaves one row with the client\'s network and no key, a range none; off, downloads leave none', async () => {
    const { apiKey: offKey } = await t.account();
    const offLink = (await uploadFile(t.baseUrl, offKey, 'off.txt', 'off')).body.public_link as string;
    expect((await t.fetch(t.url(offLink))).status).to.equal(200);
    const on = await buildTestServer('pglite', { AUDIT_DOWNLOADS: 'true' });
    try {
      const { apiKey } = await on.account();
      const file = (await uploadFile(on.baseUrl, apiKey, 'on.txt', 'on bytes')).body;
      await (await on.fetch(on.url(file.public_link))).arrayBuffer();
      await (await on.fetch(on.url(file.public_link), { headers: { Range: 'bytes=0-1' } })).arrayBuffer();
      const trail = await eventually(async () => (await call(on.url('/api/v1/audit?action=file.downloaded'), { key: apiKey })).body.events, (rows) => rows.length > 0);
      expect(trail).to.have.length(1);
      expect(trail[0]).to.deep.include({ action: 'file.downloaded', subject: String(file.file_id), actor: 'link', key_id: null, client_address: '127.0.0.0/24' });
    } finally {
      await on.close();
    }
    expect(await events(offKey, '?action=file.downloaded')).to.deep.equal([]);
  });
});
