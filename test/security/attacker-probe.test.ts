// Issue 27: the weak points an attacker's probe found, one case each, on
// both databases. Client addresses behind a proxy, lockouts that must not
// refuse valid credentials, revoked keys told apart by timing, repeated
// Authorization/Host headers, the admin listener, names that are invisible
// or blank, files on disk readable by others, connections per address, and
// file ids that counted every tenant's uploads.
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import pino from 'pino';
import { loadConfig } from '../../src/config.js';
import { commitFile } from '../../src/intake/finish.js';
import { call, uploadFile } from '../helpers/client.js';
import { backends, createTestDatabase } from '../helpers/databases.js';
import { captureLog } from '../helpers/log-capture.js';
import { startServerProcess } from '../helpers/server-process.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { create, patch, uploadUrl } from '../helpers/tus.js';

const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;

/** Every directory and file under `dir` (itself included) with its permission bits, as 'path 0700'. */
async function modesUnder(dir: string): Promise<string[]> {
  const out = [`${dir} ${((await stat(dir)).mode & 0o777).toString(8)}`];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    const path = join(entry.parentPath, entry.name);
    out.push(`${path} ${((await stat(path)).mode & 0o777).toString(8)}`);
  }
  return out;
}

const unknownToken = () => randomBytes(32).toString('base64url');

/** Writes `head` (the request line and headers, CRLF-separated, no blank line) on a new connection; resolves with the status and body. */
function raw(baseUrl: string, head: string[]): Promise<{ status: number; text: string }> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let data = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within 10 s: ${data}`));
    }, 10_000);
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (data += chunk));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0), text: data.slice(data.indexOf('\r\n\r\n') + 4) });
    });
    // Connection: close, so the answer ends with the connection.
    socket.write(`${[...head, 'Connection: close'].join('\r\n')}\r\n\r\n`);
  });
}

for (const backend of backends) {
  describe(`issue 27, an attacker's probe (${backend})`, () => {
    let t: TestServer;
    before(async () => {
      t = await startTestServer(backend, { TRUST_PROXY: 'true', AUTH_FAILURE_LIMIT: '3', LINK_FAILURE_LIMIT: '3' });
    });
    after(async () => {
      await t.close();
    });

    const stats = (key: string, forwardedFor: string) => call(t.url('/api/v1/stats'), { key, headers: { 'X-Forwarded-For': forwardedFor } });
    const fetchLink = (url: string, forwardedFor: string) => call(url, { headers: { 'X-Forwarded-For': forwardedFor } });

    describe('1. the client address behind TRUST_PROXY', () => {
      it('when a client rotates the leftmost X-Forwarded-For entry, then its bad keys still count against the address the proxy appended', async () => {
        for (let i = 1; i <= 3; i++) expect((await stats(`ds_live_wrong${i}`, `10.9.0.${i}, 5.5.1.1`)).status, `guess ${i}`).to.equal(401);
        const refused = await stats('ds_live_wrong4', '10.9.0.4, 5.5.1.1');
        expect(refused.status).to.equal(429);
        expect(refused.body.error.code).to.equal('too_many_failures');
        // A client-written entry in front of the refused address does not escape it...
        expect((await stats('ds_live_wrong5', '6.6.6.6, 5.5.1.1')).status).to.equal(429);
        // ...and another address the proxy saw is not refused for it.
        expect((await stats('ds_live_wrong6', '5.5.1.1, 5.5.1.2')).status).to.equal(401);
      });

      it('when unknown links come with rotating leftmost entries, then the address the proxy appended is refused', async () => {
        for (let i = 1; i <= 3; i++) expect((await fetchLink(t.url(`/download/${unknownToken()}`), `10.8.0.${i}, 5.5.2.1`)).status).to.equal(404);
        expect((await fetchLink(t.url(`/download/${unknownToken()}`), `10.8.0.9, 5.5.2.1`)).status).to.equal(429);
      });
    });

    describe('2. a lockout refuses guesses, never valid credentials', () => {
      it('when an address is locked out for bad keys, then its guesses get 429 and a valid key from it still passes', async () => {
        const { apiKey } = await t.account();
        for (let i = 1; i <= 3; i++) expect((await stats(`ds_live_wrong${i}`, '5.5.3.1')).status).to.equal(401);
        expect((await stats('ds_live_wrong', '5.5.3.1')).status).to.equal(429);
        expect((await stats(apiKey, '5.5.3.1')).status).to.equal(200);
        expect((await stats('ds_live_wrong', '5.5.3.1')).status, 'the guesses stay refused').to.equal(429);
        expect((await stats(apiKey, '5.5.3.1')).status).to.equal(200);
      });

      it('when an address is locked out for unknown links, then its guesses get 429 and a valid link from it still downloads', async () => {
        const { apiKey } = await t.account();
        const link = t.url((await uploadFile(t.server.url, apiKey, 'shared.txt', 'shared')).body.public_link);
        for (let i = 1; i <= 3; i++) expect((await fetchLink(t.url(`/download/${unknownToken()}`), '5.5.4.1')).status).to.equal(404);
        expect((await fetchLink(t.url(`/download/${unknownToken()}`), '5.5.4.1')).status).to.equal(429);
        const valid = await fetchLink(link, '5.5.4.1');
        expect(valid.status).to.equal(200);
        expect(valid.text).to.equal('shared');
        expect((await fetchLink(t.url('/download/not-a-token!'), '5.5.4.1')).status, 'the guesses stay refused').to.equal(429);
      });
    });

    describe('3. a revoked key and an unknown one take the same time', () => {
      it('when a revoked key and an unknown key are tried 100 times each, then their median times differ by less than the tolerance', async () => {
        // The old lookup read the key, then its account and plan in queries of their own when the row existed:
        // a revoked key took 1.74-1.78x (PGlite) and 1.53-1.58x (PostgreSQL) the median time of an unknown one here.
        // Now both are one query on the key's hash that answers no row: 0.96-1.05x. Tries alternate, so a busy machine slows both alike; each request is timed end to end, as an
        // attacker times it. Its own server: the suite's allows 3 bad keys per address.
        const u = await startTestServer(backend);
        try {
          const { accountId, apiKey: revoked } = await u.account();
          await u.admin('POST', `/admin/accounts/${accountId}/keys`);
          const unknown = `ds_live_${randomBytes(24).toString('base64url')}`;
          const time = async (key: string) => {
            const started = process.hrtime.bigint();
            const res = await call(u.url('/api/v1/stats'), { key });
            expect(res.status).to.equal(401);
            return Number(process.hrtime.bigint() - started) / 1e6;
          };
          for (let i = 0; i < 20; i++) await Promise.all([time(revoked), time(unknown)]); // warm-up
          const revokedMs: number[] = [];
          const unknownMs: number[] = [];
          for (let i = 0; i < 100; i++) {
            const order = i % 2 ? [revoked, unknown] : [unknown, revoked];
            for (const key of order) (key === revoked ? revokedMs : unknownMs).push(await time(key));
          }
          const a = median(revokedMs);
          const b = median(unknownMs);
          console.log(`      ${backend}: median revoked ${a.toFixed(2)} ms, unknown ${b.toFixed(2)} ms`);
          // 1.3x: the old code (1.53x at least) fails it, and it leaves the new one room for a busy machine.
          expect(a / b, `median revoked ${a.toFixed(2)} ms, unknown ${b.toFixed(2)} ms`).to.be.within(1 / 1.3, 1.3);
        } finally {
          await u.close();
        }
      });
    });

    describe('4. repeated Authorization or Host headers', () => {
      it('when Authorization comes twice, then 400 repeated_header, even when both copies are valid', async () => {
        const { apiKey } = await t.account();
        const host = new URL(t.server.url).host;
        const res = await raw(t.server.url, ['GET /api/v1/stats HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${apiKey}`, `Authorization: Bearer ${apiKey}`]);
        expect(res.status).to.equal(400);
        expect(JSON.parse(res.text).error.code).to.equal('repeated_header');
        const once = await raw(t.server.url, ['GET /api/v1/stats HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${apiKey}`]);
        expect(once.status).to.equal(200);
      });

      it('when Host comes twice, then 400 repeated_header on both listeners', async () => {
        for (const base of [t.server.url, t.server.adminUrl]) {
          const host = new URL(base).host;
          const res = await raw(base, ['GET /healthz HTTP/1.1', `Host: ${host}`, 'Host: evil.example', `Authorization: Bearer ${t.server.adminToken}`]);
          expect(res.status, base).to.equal(400);
          expect(JSON.parse(res.text).error.code).to.equal('repeated_header');
        }
      });
    });

    describe('5. the admin listener', () => {
      it('when a request has no valid token, then every path answers 401 before its body is read or its route matched', async () => {
        // The admin listener trusts no proxy: every try counts against 127.0.0.1, so these run on a server with the tests' roomy failure limit.
        const u = await startTestServer(backend);
        try {
          const admin = (path: string, init: RequestInit = {}) => call(u.server.adminUrl + path, init);
          const asked = [
            await admin('/admin/accounts', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{bad' }),
            await admin('/admin/accounts'),
            await admin('/admin/no-such-route'),
            await admin('/nothing-here'),
            await admin('/metrics'),
          ];
          for (const res of asked) {
            expect(res.status).to.equal(401);
            expect(res.body.error.code).to.equal('invalid_admin_token');
          }
        } finally {
          await u.close();
        }
      });

      it('when an address sends wrong admin tokens repeatedly, then it is throttled with 429, the right token too (issue 38)', async () => {
        const u = await startTestServer(backend, { AUTH_FAILURE_LIMIT: '3' });
        try {
          const plans = (token: string) => call(`${u.server.adminUrl}/admin/plans`, { key: token });
          expect((await plans(u.server.adminToken)).status, 'a right token is given back, not counted').to.equal(200);
          for (let i = 1; i <= 3; i++) expect((await plans(`wrong-${i}`)).status).to.equal(401);
          const refused = await plans('wrong-4');
          expect(refused.status).to.equal(429);
          expect(refused.body.error.code).to.equal('too_many_failures');
          // Issue 38: a 200 here told a locked-out guesser that it had found the token.
          const right = await plans(u.server.adminToken);
          expect(right.status, 'the right token from the locked-out address').to.equal(429);
          expect(Number(right.headers.get('retry-after'))).to.be.within(1, 60);
        } finally {
          await u.close();
        }
      });

      it('when the admin listener binds a non-loopback address, then start warns; an ADMIN_TOKEN under 32 characters stops start with one line naming it, on loopback too (issue 38)', async () => {
        const lines: { msg?: string; level?: number }[] = [];
        const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
        const u = await startTestServer(backend, { ADMIN_HOST: '0.0.0.0' }, logger);
        await u.close();
        expect(lines.some((l) => l.level === 40 && /admin listener is reachable from other machines/.test(l.msg ?? ''))).to.equal(true);
        expect(() => loadConfig({ ADMIN_HOST: '0.0.0.0', ADMIN_TOKEN: 'sixteen-chars-ok-but-short' })).to.throw(/ADMIN_TOKEN.*at least 32 characters/);
        expect(() => loadConfig({ ADMIN_HOST: '127.0.0.1', ADMIN_TOKEN: 'x'.repeat(31) })).to.throw(/ADMIN_TOKEN.*at least 32 characters/);
        expect(loadConfig({ ADMIN_HOST: '127.0.0.1', ADMIN_TOKEN: 'x'.repeat(32) }).adminToken).to.equal('x'.repeat(32));
        expect(loadConfig({ ADMIN_HOST: '0.0.0.0', ADMIN_TOKEN: 'x'.repeat(32) }).adminToken).to.equal('x'.repeat(32));
      });
    });

    describe('7. files on disk', () => {
      it('when the server starts under umask 022, then DATA_DIR and every folder in it are 0700 and every file 0600, objects, temp files and database alike', async () => {
        const parent = await mkdtemp(join(tmpdir(), 'dropstream-modes-'));
        const dataDir = join(parent, 'data');
        const database = backend === 'postgresql' ? await createTestDatabase() : undefined;
        // The child inherits the umask it is spawned with.
        const umask = process.umask(0o022);
        const server = await startServerProcess({ DATA_DIR: dataDir, ...(database ? { DATABASE_URL: database.url } : {}) }).finally(() =>
          process.umask(umask),
        );
        try {
          await server.admin('PUT', '/admin/plans/roomy', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 1_000_000, daily_uploads: 1000 });
          const { api_key: key } = await server.admin('POST', '/admin/accounts', { plan: 'roomy' });
          expect((await uploadFile(server.url, key, 'a.txt', 'secret')).status).to.equal(201);
          // A resumable upload half done: its temp file stays in objects/.tmp.
          const created = await create(server.url, key, { length: 10, filename: 'b.txt' });
          expect(created.status).to.equal(201);
          expect((await patch(uploadUrl(server.url, created), key, 0, Buffer.from('12345'))).status).to.equal(204);
          const modes = await modesUnder(dataDir);
          expect(modes.filter((m) => m.includes('/objects/') && m.endsWith(' 600')).length, modes.join('\n')).to.be.at.least(2);
          if (backend === 'pglite') expect(modes.some((m) => m.includes('/pglite/') && m.endsWith(' 600')), modes.join('\n')).to.equal(true);
          const wide = [];
          for (const line of modes) {
            const path = line.slice(0, line.lastIndexOf(' '));
            const want = (await stat(path)).isDirectory() ? '700' : '600';
            if (!line.endsWith(` ${want}`)) wide.push(`${line} (want ${want})`);
          }
          expect(wide, 'wider than the owner').to.deep.equal([]);
        } finally {
          await server.kill('SIGTERM');
          await database?.drop();
          await rm(parent, { recursive: true, force: true });
        }
      });

      it('when an existing DATA_DIR is readable by others, then start narrows it to 0700 and warns naming its old mode', async () => {
        const dataDir = await mkdtemp(join(tmpdir(), 'dropstream-wide-'));
        await chmod(dataDir, 0o755);
        const log = captureLog('warn');
        const u = await startTestServer(backend, { DATA_DIR: dataDir }, log.logger);
        try {
          expect((await stat(dataDir)).mode & 0o777).to.equal(0o700);
          const warning = log.lines.find((l) => l.level === 40 && /DATA_DIR/.test(l.msg ?? ''));
          expect(warning, JSON.stringify(log.lines)).to.include({ data_dir: dataDir, mode: '755' });
        } finally {
          await u.close();
          await rm(dataDir, { recursive: true, force: true });
        }
      });
    });

    describe('8. connections per client address', () => {
      it('when one address opens the cap and 3 more silent connections, then the extra ones are closed at once and counted, and after the others close a request succeeds', async () => {
        const cap = 5;
        const u = await startTestServer(backend, { MAX_CONNECTIONS_PER_ADDRESS: String(cap), HEADERS_TIMEOUT: '60' });
        const { hostname, port } = new URL(u.server.url);
        const sockets: { socket: Socket; closed: Promise<number> }[] = [];
        /** Opens a silent connection; `closed` resolves with the ms from connect to close. */
        const open = () =>
          new Promise<{ socket: Socket; closed: Promise<number> }>((resolve, reject) => {
            const socket = connect(Number(port), hostname);
            socket.on('error', () => {});
            socket.once('connect', () => {
              const connected = Date.now();
              const closed = new Promise<number>((done) => socket.once('close', () => done(Date.now() - connected)));
              resolve({ socket, closed });
            });
            socket.once('close', () => reject(new Error('closed before it connected')));
          });
        try {
          // One at a time: the listener accepts them in this order, so the first `cap` are the ones kept.
          for (let i = 0; i < cap + 3; i++) sockets.push(await open());
          const extra = sockets.slice(cap);
          const within = (ms: number) => new Promise<'open'>((r) => setTimeout(() => r('open'), ms));
          for (const { closed } of extra) expect(await Promise.race([closed, within(5_000)]), 'an extra connection').to.be.a('number');
          for (const { closed } of sockets.slice(0, cap)) expect(await Promise.race([closed, within(50)]), 'a connection within the cap').to.equal('open');
          const metrics = await call(`${u.server.adminUrl}/metrics`, { key: u.server.adminToken });
          expect(metrics.text).to.match(/^dropstream_connections_refused_total 3$/m);

          for (const { socket } of sockets.slice(0, cap)) socket.destroy();
          // The server sees the closes a moment later; a request then gets through.
          let status = 0;
          for (let tries = 0; tries < 50 && status !== 200; tries++) {
            status = await call(u.url('/healthz')).then((r) => r.status, () => 0);
            if (status !== 200) await new Promise((r) => setTimeout(r, 20));
          }
          expect(status).to.equal(200);
        } finally {
          for (const { socket } of sockets) socket.destroy();
          await u.close();
        }
      });

      it('when MAX_CONNECTIONS_PER_ADDRESS is unset, then the cap is 256; 0 turns it off; a negative value stops start', () => {
        expect(loadConfig({}).maxConnectionsPerAddress).to.equal(256);
        expect(loadConfig({ MAX_CONNECTIONS_PER_ADDRESS: '0' }).maxConnectionsPerAddress).to.equal(0);
        expect(() => loadConfig({ MAX_CONNECTIONS_PER_ADDRESS: '-1' })).to.throw(/MAX_CONNECTIONS_PER_ADDRESS/);
      });
    });

    describe('9. file ids', () => {
      it('when two accounts upload in turns, then no id follows the one before it: ids do not count uploads', async () => {
        const a = await t.account();
        const b = await t.account();
        const ids: number[] = [];
        for (const key of [a.apiKey, b.apiKey, b.apiKey, b.apiKey, b.apiKey, b.apiKey, a.apiKey]) {
          const res = await uploadFile(t.server.url, key, 'x.txt', 'x');
          expect(res.status).to.equal(201);
          ids.push(res.body.file_id);
        }
        for (const id of ids) expect(id).to.be.a('number').within(1, 2 ** 31 - 1);
        // A sequence gives 1, 1, 1, ...: account a would learn that 5 files came between its two.
        const steps = ids.slice(1).map((id, i) => id - ids[i]!);
        expect(steps.filter((step) => step === 1), `steps ${steps.join(', ')}`).to.deep.equal([]);
        expect(new Set(ids).size).to.equal(ids.length);
      });

      /** An account with one file (its id is `taken`) and a second file stored and recorded as pending, ready to commit. */
      async function secondFile() {
        const { accountId, apiKey } = await t.account();
        const taken = (await uploadFile(t.server.url, apiKey, 'first.txt', 'abc')).body.file_id as number;
        const { prisma } = t.server.db;
        const storageKey = `xx/${randomBytes(16).toString('hex')}`;
        await prisma.pendingObject.create({ data: { storageKey, reason: 'upload', accountId } });
        const file = { accountId, filename: 'second.txt', size: 5, sha256: '0'.repeat(64), storageKey };
        return { apiKey, taken, prisma, storageKey, file };
      }

      it('when a new file draws an id already taken, then it draws again and is stored once, counted once', async () => {
        const { apiKey, taken, prisma, storageKey, file } = await secondFile();
        const draws = [taken, taken, 12345 + Math.floor(Math.random() * 1e6)];
        const record = await commitFile(prisma, file, () => draws.shift()!);
        expect(record.id).to.not.equal(taken);
        expect(draws).to.deep.equal([]);
        expect(await prisma.pendingObject.count({ where: { storageKey } })).to.equal(0);
        const stats = await call(t.url('/api/v1/stats'), { key: apiKey });
        expect(stats.body.stats).to.deep.equal({ total_files: 2, total_size: 8, reserved_size: 0 });
      });

      it('when every draw is taken, then the commit fails after five and leaves the pending record and the counters as they were', async () => {
        const { apiKey, taken, prisma, storageKey, file } = await secondFile();
        let draws = 0;
        const failed = await commitFile(prisma, file, () => (draws++, taken)).then(() => undefined, (err: unknown) => err);
        expect(failed).to.be.instanceOf(Error);
        expect(draws).to.equal(5);
        expect(await prisma.pendingObject.count({ where: { storageKey } })).to.equal(1);
        const stats = await call(t.url('/api/v1/stats'), { key: apiKey });
        expect(stats.body.stats).to.deep.equal({ total_files: 1, total_size: 3, reserved_size: 0 });
      });
    });

    describe('6. names that are invisible or blank', () => {
      // One per class: every Bidi_Control and Default_Ignorable_Code_Point, and blank names.
      const names: [string, string][] = [
        ['the Arabic letter mark U+061C (Bidi_Control)', 'a\u061Cb.txt'],
        ['a left-to-right isolate U+2066 (Bidi_Control)', 'a\u2066b.txt'],
        ['a zero-width space U+200B (Default_Ignorable)', 'a\u200Bb.txt'],
        ['a zero-width non-joiner U+200C (Default_Ignorable)', 'a\u200Cb.txt'],
        ['a zero-width joiner U+200D (Default_Ignorable)', 'a\u200Db.txt'],
        ['a word joiner U+2060 (Default_Ignorable)', 'a\u2060b.txt'],
        ['a byte-order mark mid-name U+FEFF (Default_Ignorable)', 'a\uFEFFb.txt'],
        ['the language tag U+E0001 (Default_Ignorable)', 'a\u{E0001}b.txt'],
        ['a soft hyphen U+00AD (Default_Ignorable)', 'a\u00ADb.txt'],
        ['a variation selector U+FE0F (Default_Ignorable)', 'a\uFE0Fb.txt'],
        ['only spaces', '   '],
        ['only no-break spaces', '\u00A0\u00A0'],
        ['only an ideographic space', '\u3000'],
      ];
      for (const [what, name] of names) {
        it(`when a plain upload's name has ${what}, then 400 invalid_filename`, async () => {
          const { apiKey } = await t.account();
          const res = await uploadFile(t.server.url, apiKey, name, 'x');
          expect(res.status, JSON.stringify(res.body)).to.equal(400);
          expect(res.body.error.code).to.equal('invalid_filename');
        });

        it(`when a resumable upload's name has ${what}, then 400 invalid_filename`, async () => {
          const { apiKey } = await t.account();
          const res = await create(t.server.url, apiKey, { length: 1, filename: name });
          expect(res.status, JSON.stringify(res.body)).to.equal(400);
          expect(res.body.error.code).to.equal('invalid_filename');
        });
      }

      it('when a name has visible letters around ordinary spaces, then it is kept', async () => {
        const { apiKey } = await t.account();
        const res = await uploadFile(t.server.url, apiKey, ' my file .txt', 'x');
        expect(res.status).to.equal(201);
        expect(res.body.filename).to.equal(' my file .txt');
      });
    });
  });
}
