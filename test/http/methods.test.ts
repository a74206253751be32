// Methods as routing sees them: every answer is the JSON error shape, on both
// listeners, and /files/upload is a path of its own, not a file id.
import { request } from 'node:http';
import { expect } from 'chai';
import { call, uploadFile } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import type { TestServer } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';

/** node:http, because fetch refuses TRACE and friends. */
function send(url: string, method: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const UNROUTED = ['TRACE', 'PROPFIND', 'MKCOL', 'COPY', 'LOCK', 'PURGE'];

for (const backend of backends) {
  describe(`methods (${backend})`, () => {
    let t: TestServer;
    let key: string;

    before(async () => {
      t = await sharedServer(backend);
      ({ apiKey: key } = await t.account());
    });

    for (const method of UNROUTED) {
      it(`when ${method} reaches either listener, then 501 not_implemented in the JSON error shape (the admin listener once the token is right, 401 before)`, async () => {
        const admin = `${t.server.adminUrl}/admin/plans`;
        const anonymous = await send(admin, method);
        expect(anonymous.status, `${method} ${admin} without the admin token`).to.equal(401);
        for (const url of [t.url('/api/v1/files'), t.url('/download/AAAAAAAAAAAAAAAAAAAAAA'), t.url('/nowhere'), admin]) {
          const res = await send(url, method, url === admin ? { Authorization: `Bearer ${t.server.adminToken}` } : {});
          expect(res.status, `${method} ${url}`).to.equal(501);
          expect(res.headers['content-type']).to.equal('application/json; charset=utf-8');
          expect(JSON.parse(res.body)).to.deep.equal({ success: false, error: { code: 'not_implemented', message: `The method ${method} is not supported` } });
        }
      });
    }

    for (const method of ['GET', 'HEAD', 'DELETE', 'PUT', 'PATCH']) {
      it(`when ${method} /api/v1/files/upload is sent, then 405 with Allow: POST (not an invalid file id), before any key is checked`, async () => {
        for (const headers of [{ Authorization: `Bearer ${key}` }, {} as Record<string, string>]) {
          const res = await send(t.url('/api/v1/files/upload'), method, headers);
          expect(res.status).to.equal(405);
          expect(res.headers.allow).to.equal('POST');
          if (method !== 'HEAD') expect(JSON.parse(res.body).error.code).to.equal('method_not_allowed');
        }
      });
    }

    it('when a method the tus routes do not take reaches /api/v1/uploads, then 405 with the Allow of that path, in the JSON error shape', async () => {
      for (const [path, method, allow] of [
        ['/api/v1/uploads', 'PUT', 'GET, HEAD, OPTIONS, POST'],
        ['/api/v1/uploads', 'DELETE', 'GET, HEAD, OPTIONS, POST'],
        ['/api/v1/uploads/AAAAAAAAAAAAAAAAAAAAAA', 'PUT', 'HEAD, PATCH, DELETE, GET'],
        ['/api/v1/uploads/AAAAAAAAAAAAAAAAAAAAAA', 'POST', 'HEAD, PATCH, DELETE, GET'],
      ] as const) {
        const res = await send(t.url(path), method, { Authorization: `Bearer ${key}`, 'Tus-Resumable': '1.0.0' });
        expect(res.status, `${method} ${path}`).to.equal(405);
        expect(String(res.headers.allow).split(', ').sort()).to.deep.equal(allow.split(', ').sort());
        expect(JSON.parse(res.body).error.code).to.equal('method_not_allowed');
      }
      expect((await send(t.url('/api/v1/uploads'), 'TRACE')).status).to.equal(501);
    });

    it('when POST /api/v1/files/upload is sent, then it still uploads, and GET /api/v1/files/<id> still reads', async () => {
      const up = await uploadFile(t.server.url, key, 'still.txt', 'works');
      expect(up.status).to.equal(201);
      expect((await call(t.url(`/api/v1/files/${up.body.file_id}`), { key })).body.file.filename).to.equal('still.txt');
      expect((await call(t.url('/api/v1/files/uploads'), { key })).body.error.code).to.equal('invalid_file_id');
    });
  });
}
