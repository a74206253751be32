// The links of files (src/links/links.ts) and downloads through them
// (src/links/download.ts: authorise, then open), on a real database and the real local store:
// every file has a primary link, links are created, listed and revoked
// (revoking the primary one rotates it), and a download checks a link's
// expiry, password and byte budget, the budget holding when many downloads
// race for it.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { migrationsDir } from '../../src/db/migrate.js';
import { AppError } from '../../src/errors.js';
import type { DownloadCredentials, PasswordGuard } from '../../src/links/download.js';
import { derivations, hashPassword, verifyPassword } from '../../src/links/link-password.js';
import type { FileLinks } from '../../src/links/links.js';
import { LinkService } from '../../src/links/service.js';
import type { ByteRange } from '../../src/storage/object-store.js';
import type { PrismaClient } from '../../src/generated/prisma/client.js';
import { LocalObjectStore } from '../../src/storage/local.js';
import { call, uploadFile } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { PooledRead } from '../../src/storage/pooled-read.js';

/** What the route decides once it has the grant: a body (of a range, or whole), or none (HEAD, 304). */
type BodyChoice = { range?: ByteRange } | undefined;
const whole: () => BodyChoice = () => ({});
const headOnly: () => BodyChoice = () => undefined;

async function codeOf(work: Promise<unknown>): Promise<string> {
  try {
    await work;
  } catch (err) {
    if (err instanceof AppError) return err.code;
    throw err;
  }
  return 'none';
}

/** The status of a GET, its body read to the end (an unread body holds the server's file open). */
const statusOf = async (url: string) => {
  const res = await fetch(url);
  await res.arrayBuffer();
  return res.status;
};

/** The text of a download's body (the local store's: a stream, never a pooled read). */
const text = async (body: Readable | PooledRead | undefined) => {
  if (body instanceof PooledRead) throw new Error('a local download is a stream');
  const chunks: Buffer[] = [];
  for await (const chunk of body!) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString();
};

for (const backend of backends) {
  describe(`files: links and downloads through them (${backend})`, function () {
    this.timeout(60_000);
    let t: TestServer;
    let prisma: PrismaClient;
    let service: LinkService;
    let links: FileLinks;
    let key: string;
    let accountId: number;

    before(async () => {
      t = await startTestServer(backend, { GC_INTERVAL: '0' });
      prisma = t.server.db.prisma;
      const store = new LocalObjectStore({ root: join(t.dataDir, 'objects') });
      service = new LinkService({ prisma, store });
      links = service.links;
    });
    after(() => t?.close());

    /** A download as the route makes it: authorised, then (when a body is chosen) opened; undefined for no such link. */
    async function openDownload(token: string, choose: () => BodyChoice, credentials?: DownloadCredentials) {
      const grant = await service.downloads.authorise(token, credentials);
      if (!grant) return undefined;
      const choice = choose();
      if (!choice) return { length: 0, body: undefined, settle: async () => {} };
      return service.downloads.open(grant, choice.range);
    }
    beforeEach(async () => {
      ({ apiKey: key, accountId } = await t.account());
    });

    /** Uploads `content`; its id and primary token. */
    async function newFile(content = 'hello, links'): Promise<{ id: number; token: string }> {
      const res = await uploadFile(t.server.url, key, 'f.txt', content);
      expect(res.status).to.equal(201);
      return { id: res.body.file_id, token: (res.body.public_link as string).split('/').pop()! };
    }

    it('when a file is uploaded, then its public link is its primary link: listed, with its token and no rules', async () => {
      const file = await newFile();
      const listed = await links.list(accountId, file.id);
      expect(listed).to.have.length(1);
      expect(listed![0]).to.include({ fileId: file.id, token: file.token, primary: true, passwordProtected: false, downloadCount: 0 });
      expect(listed![0]!.expiresAt).to.equal(undefined);
      expect(listed![0]!.maxDownloads).to.equal(undefined);
      expect(listed![0]!.id).to.match(/^[0-9a-f-]{36}$/);
      const resolved = await links.resolve(file.token);
      expect(resolved?.file).to.include({ id: file.id, accountId, size: 12, linkToken: file.token });
    });

    it('when another account asks for a file\'s links, creates or revokes one, then it is as if the file did not exist', async () => {
      const file = await newFile();
      const other = await t.account();
      const [primary] = (await links.list(accountId, file.id))!;
      expect(await links.list(other.accountId, file.id)).to.equal(undefined);
      expect(await links.create(other.accountId, file.id, {})).to.equal(undefined);
      expect(await links.revoke(other.accountId, file.id, primary!.id)).to.equal(undefined);
      expect(await links.list(accountId, file.id)).to.have.length(1);
    });

    it('when links are created, then each has its own token and rules, and the list shows the primary first', async () => {
      const file = await newFile();
      const expiresAt = new Date(Date.now() + 3600_000);
      const limited = await links.create(accountId, file.id, { maxDownloads: 3, expiresAt });
      const secret = await links.create(accountId, file.id, { passwordHash: await hashPassword('s3cret') });
      expect(limited).to.include({ primary: false, maxDownloads: 3, passwordProtected: false });
      expect(limited!.expiresAt!.getTime()).to.equal(expiresAt.getTime());
      expect(secret).to.include({ primary: false, passwordProtected: true });
      expect(new Set([file.token, limited!.token, secret!.token]).size).to.equal(3);
      const listed = await links.list(accountId, file.id);
      expect(listed!.map((l) => l.primary)).to.deep.equal([true, false, false]);
      expect(listed!.map((l) => l.id).slice(1).sort()).to.deep.equal([limited!.id, secret!.id].sort());
    });

    it('when a link is revoked, then its token resolves to nothing and the others stay', async () => {
      const file = await newFile();
      const extra = (await links.create(accountId, file.id, {}))!;
      expect(await links.revoke(accountId, file.id, extra.id)).to.deep.equal({ outcome: 'revoked' });
      expect(await links.resolve(extra.token)).to.equal(undefined);
      expect(await links.revoke(accountId, file.id, extra.id)).to.equal(undefined);
      expect((await links.resolve(file.token))?.link.primary).to.equal(true);
    });

    it('when the primary link is revoked, then the file gets a fresh primary link with the same rules, and public_link shows it', async () => {
      const file = await newFile();
      const [primary] = (await links.list(accountId, file.id))!;
      await prisma.link.update({ where: { id: primary!.id }, data: { maxDownloads: 2, downloadCount: 5n } });
      const revoked = await links.revoke(accountId, file.id, primary!.id);
      expect(await links.resolve(file.token)).to.equal(undefined);
      const listed = (await links.list(accountId, file.id))!;
      expect(listed).to.have.length(1);
      // The answer carries the fresh link as a list would show it.
      expect(revoked).to.deep.equal({ outcome: 'rotated', primary: listed[0] });
      expect(listed[0]).to.include({ primary: true, maxDownloads: 2, downloadCount: 0 });
      expect(listed[0]!.token).to.not.equal(file.token);
      const info = await call(t.url(`/api/v1/files/${file.id}`), { key });
      expect(info.body.file.public_link).to.equal(`http://files.test/download/${listed[0]!.token}`);
      expect(await statusOf(t.url(info.body.file.public_link))).to.equal(200);
      expect(await statusOf(t.url(`/download/${file.token}`))).to.equal(404);
    });

    it('when a file is deleted, then its links go with it', async () => {
      const file = await newFile();
      await links.create(accountId, file.id, {});
      expect((await call(t.url(`/api/v1/files/${file.id}`), { method: 'DELETE', key })).status).to.equal(200);
      expect(await prisma.link.count({ where: { fileId: file.id } })).to.equal(0);
    });

    it('when a download of an unknown token is opened, then there is none; of a known one, the body and, once settled, the counts', async () => {
      const file = await newFile('twelve bytes');
      expect(await openDownload('x'.repeat(22), whole)).to.equal(undefined);
      const download = (await openDownload(file.token, whole))!;
      expect(download.length).to.equal(12);
      expect(await text(download.body)).to.equal('twelve bytes');
      await download.settle(12);
      await download.settle(12); // once only
      const [primary] = (await links.list(accountId, file.id))!;
      expect(primary!.downloadCount).to.equal(1);
      expect((await call(t.url(`/api/v1/files/${file.id}`), { key })).body.file.download_count).to.equal(1);
    });

    it('when a limited link is authorised, then nothing is reserved until open; when it is revoked between the two, then open finds it gone and reserves nothing', async () => {
      const file = await newFile('0123456789');
      const link = (await links.create(accountId, file.id, { maxDownloads: 1 }))!;
      const served = async () => (await prisma.link.findUnique({ where: { id: link.id }, select: { bytesServed: true } }))?.bytesServed;
      const grant = (await service.downloads.authorise(link.token))!;
      expect(grant).to.include({ linkId: link.id, budget: 10, maxDownloads: 1 });
      expect(await served(), 'after authorise').to.equal(0n);
      const opened = (await service.downloads.open(grant, { start: 2, end: 5 }))!;
      expect(await served(), 'after open of 4 bytes').to.equal(4n);
      expect(await text(opened.body)).to.equal('2345');
      await opened.settle(4);
      const stale = (await service.downloads.authorise(link.token))!;
      await service.revoke(accountId, file.id, link.id);
      expect(await service.downloads.open(stale)).to.equal(undefined);
    });

    it('when a link has expired, then opening it is link_expired, HEAD included', async () => {
      const file = await newFile();
      const past = (await links.create(accountId, file.id, { expiresAt: new Date(Date.now() - 1000) }))!;
      expect(await codeOf(openDownload(past.token, whole))).to.equal('link_expired');
      expect(await codeOf(openDownload(past.token, headOnly))).to.equal('link_expired');
      const future = (await links.create(accountId, file.id, { expiresAt: new Date(Date.now() + 60_000) }))!;
      expect(await codeOf(openDownload(future.token, headOnly))).to.equal('none');
    });

    it('when a link has a password, then none is password_required, a wrong one wrong_password (reserved, then kept), the right one opens (reserved, then given back)', async () => {
      const file = await newFile('secret body!');
      const link = (await links.create(accountId, file.id, { passwordHash: await hashPassword('correct horse') }))!;
      const seen: string[] = [];
      const guard: PasswordGuard = {
        check: async (linkId) => void seen.push(`check ${linkId === link.id}`),
        reserve: async (linkId) => {
          seen.push(`reserve ${linkId === link.id}`);
          return async (outcome) => void seen.push(outcome);
        },
      };
      expect(await codeOf(openDownload(link.token, whole, { guard }))).to.equal('password_required');
      expect(seen).to.deep.equal([]);
      expect(await codeOf(openDownload(link.token, whole, { password: 'wrong', guard }))).to.equal('wrong_password');
      expect(seen.splice(0)).to.deep.equal(['reserve true', 'wrong']);
      const refused: PasswordGuard = { check: guard.check, reserve: async () => { throw new AppError('too_many_failures', 'slow down'); } };
      expect(await codeOf(openDownload(link.token, whole, { password: 'correct horse', guard: refused }))).to.equal('too_many_failures');
      const download = (await openDownload(link.token, whole, { password: 'correct horse', guard }))!;
      expect(await text(download.body)).to.equal('secret body!');
      expect(seen.splice(0)).to.deep.equal(['reserve true', 'right']);
      // Verified lately: no scrypt and no guess to reserve, but the locks are still asked.
      const again = (await openDownload(link.token, whole, { password: 'correct horse', guard }))!;
      await text(again.body);
      expect(seen.splice(0)).to.deep.equal(['check true']);
      const locked: PasswordGuard = { reserve: guard.reserve, check: async () => { throw new AppError('too_many_failures', 'slow down'); } };
      expect(await codeOf(openDownload(link.token, whole, { password: 'correct horse', guard: locked }))).to.equal('too_many_failures');
    });

    it('when a password is hashed, then the hash is salted scrypt, never the password, and only the password verifies', async () => {
      const [a, b] = [await hashPassword('pässwörd'), await hashPassword('pässwörd')];
      expect(a).to.match(/^scrypt\$16384\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
      expect(a).to.not.equal(b);
      expect(a).to.not.include('pässwörd');
      expect(await verifyPassword('pässwörd', a)).to.equal(true);
      expect(await verifyPassword('passwörd', a)).to.equal(false);
      expect(await verifyPassword('pässwörd', 'plain')).to.equal(false);
    });

    it('when a password was verified, then the next requests with it skip scrypt, while a wrong one, or a new hash of it, pays in full', async () => {
      const stored = await hashPassword('range after range');
      const runs = () => derivations.count;
      let before = runs();
      expect(await verifyPassword('range after range', stored)).to.equal(true);
      expect(runs() - before, 'the first verification').to.equal(1);
      before = runs();
      for (let i = 0; i < 5; i++) expect(await verifyPassword('range after range', stored)).to.equal(true);
      expect(runs() - before, 'five more requests of the same download').to.equal(0);
      for (let i = 0; i < 2; i++) expect(await verifyPassword('range after rangE', stored)).to.equal(false);
      expect(runs() - before, 'each wrong password').to.equal(2);
      const rehashed = await hashPassword('range after range'); // the link's password set again: a new salt
      before = runs();
      expect(await verifyPassword('range after range', rehashed)).to.equal(true);
      expect(runs() - before, 'a new stored hash').to.equal(1);
    });

    it('when 12 downloads of a max_downloads 1 link open at once, then exactly one gets a body and the others link_exhausted', async () => {
      const file = await newFile();
      const link = (await links.create(accountId, file.id, { maxDownloads: 1 }))!;
      const outcomes = await Promise.allSettled(Array.from({ length: 12 }, () => openDownload(link.token, whole)));
      const opened = outcomes.filter((o) => o.status === 'fulfilled');
      const refused = outcomes.filter((o) => o.status === 'rejected').map((o) => (o.reason as AppError).code);
      expect(opened).to.have.length(1);
      expect(refused).to.deep.equal(Array(11).fill('link_exhausted'));
      const download = (opened[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof openDownload>>>).value!;
      expect(await text(download.body)).to.equal('hello, links');
      await download.settle(download.length);
      // Used up for any request now, headers only included.
      expect(await codeOf(openDownload(link.token, headOnly))).to.equal('link_exhausted');
    });

    it('when ranges are taken from a limited link, then each costs its bytes, and no more than max_downloads x size is ever served', async () => {
      const file = await newFile('0123456789'); // 10 bytes, budget 2 x 10
      const link = (await links.create(accountId, file.id, { maxDownloads: 2 }))!;
      const range = (start: number, end: number) => () => ({ range: { start, end } });
      let served = 0;
      for (let start = 0; ; start = (start + 3) % 10) {
        const end = Math.min(start + 2, 9);
        const code = await codeOf(
          openDownload(link.token, range(start, end)).then(async (d) => {
            served += (await text(d!.body)).length;
            await d!.settle(d!.length);
          }),
        );
        if (code !== 'none') {
          expect(code).to.equal('link_exhausted');
          break;
        }
      }
      expect(served).to.be.at.most(20).and.at.least(18);
      expect(await codeOf(openDownload(link.token, whole))).to.equal('link_exhausted');
      // A range counts no complete download, even of a limited link.
      expect((await links.list(accountId, file.id))!.find((l) => l.id === link.id)!.downloadCount).to.equal(0);
    });

    it('when a limited download is cut short, then what was not handed on is given back, so the rest can still be fetched', async () => {
      const file = await newFile('0123456789');
      const link = (await links.create(accountId, file.id, { maxDownloads: 1 }))!;
      const cut = (await openDownload(link.token, whole))!;
      cut.body!.destroy();
      await cut.settle(4); // 4 bytes left, 6 come back
      expect(await codeOf(openDownload(link.token, whole))).to.equal('link_exhausted');
      const rest = (await openDownload(link.token, () => ({ range: { start: 4, end: 9 } })))!;
      expect(await text(rest.body)).to.equal('456789');
      await rest.settle(6);
      expect(await codeOf(openDownload(link.token, () => ({ range: { start: 0, end: 0 } })))).to.equal('link_exhausted');
    });

    it('when a download stopped early took under an eighth of the file, then a whole download still opens (once), but a range gets no slack (issue 38)', async () => {
      const file = await newFile('0123456789abcdef'); // 16 bytes: budget 16, slack 2
      const link = (await links.create(accountId, file.id, { maxDownloads: 1 }))!;
      const early = (await openDownload(link.token, whole))!;
      early.body!.destroy();
      await early.settle(2); // it acknowledged 2 bytes
      const range = () => ({ range: { start: 2, end: 15 } });
      const recipient = (await openDownload(link.token, whole))!;
      expect(await text(recipient.body)).to.equal('0123456789abcdef');
      await recipient.settle(recipient.length);
      // Used up: 18 of 16 + 2 taken; no second whole download, and no range either.
      expect(await codeOf(openDownload(link.token, whole))).to.equal('link_exhausted');
      expect(await codeOf(openDownload(link.token, range))).to.equal('link_exhausted');
      const fresh = (await links.create(accountId, file.id, { maxDownloads: 1 }))!;
      const taken = (await openDownload(fresh.token, whole))!;
      taken.body!.destroy();
      await taken.settle(3); // 3 bytes: more than the slack
      expect(await codeOf(openDownload(fresh.token, whole))).to.equal('link_exhausted');
    });

    it('when a link of an empty file has max_downloads 2, then two downloads open and the third is link_exhausted', async () => {
      const file = await newFile('');
      const link = (await links.create(accountId, file.id, { maxDownloads: 2 }))!;
      for (let i = 0; i < 2; i++) await (await openDownload(link.token, whole))!.settle(0);
      expect(await codeOf(openDownload(link.token, whole))).to.equal('link_exhausted');
      expect((await links.list(accountId, file.id))!.find((l) => l.id === link.id)!.downloadCount).to.equal(2);
    });

    it('when the links migration meets files with tokens, then each becomes the primary link, token and downloads unchanged', async () => {
      const file = await newFile();
      await prisma.file.update({ where: { id: file.id }, data: { downloadCount: 7n } });
      await prisma.link.deleteMany({ where: { fileId: file.id } }); // as before the migration
      const sql = await readFile(join(migrationsDir, '20261126031431_links', 'migration.sql'), 'utf8');
      const copy = sql.slice(sql.indexOf('INSERT INTO "links"'));
      await prisma.$executeRawUnsafe(copy.replace('FROM "files"', `FROM "files" WHERE "id" = ${file.id}`));
      const [primary] = (await links.list(accountId, file.id))!;
      expect(primary).to.include({ token: file.token, primary: true, downloadCount: 7, passwordProtected: false });
      expect(await statusOf(t.url(`/download/${file.token}`))).to.equal(200);
    });
  });
}
