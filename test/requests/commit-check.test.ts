// The statement that saves a file re-checks its file request under the
// request's row lock (issue 50, 5): an upload whose request was closed or
// expired while it was in flight is refused there, and nothing is written,
// whatever the cuts in flight (live-uploads.ts) missed. Driven here below
// HTTP, on the statement itself (commitFile).
import pg from 'pg';
import { expect } from 'chai';
import { commitFile } from '../../src/intake/finish.js';
import { UploadEnded } from '../../src/files/errors.js';
import { newStorageKey } from '../../src/files/record.js';
import { UploadLedger } from '../../src/ledger/ledger.js';
import { takePlace } from '../../src/intake/places.js';
import { backends, createTestDatabase, describeWithPostgres } from '../helpers/databases.js';
import { eventually } from '../helpers/raw-upload.js';
import { buildTestServer, type BuiltTestServer } from '../helpers/built-server.js';
import { newRequest } from './helpers.js';

const SHA256 = '0'.repeat(64);

/** An upload through a new request of a new account, recorded and holding its place, ready to commit. */
async function uploadThroughRequest(t: BuiltTestServer) {
  const { prisma } = t.built.db;
  const owner = await t.account();
  const request = await newRequest(t, owner.apiKey, {});
  const storageKey = newStorageKey();
  await new UploadLedger(prisma).openUpload(storageKey, owner.accountId, 1000, () => {});
  await takePlace(prisma, request.request_id, storageKey);
  const commit = () => commitFile(prisma, { accountId: owner.accountId, filename: 'late.bin', size: 1, sha256: SHA256, storageKey });
  return { owner, requestId: request.request_id as string, storageKey, commit };
}

async function refusal(work: Promise<unknown>): Promise<unknown> {
  return work.then(
    () => expect.fail('the commit went through'),
    (err: unknown) => err,
  );
}

for (const backend of backends) {
  describe(`file requests: the commit re-checks the request (${backend})`, function () {
    this.timeout(30_000);
    let t: BuiltTestServer;
    before(async () => {
      t = await buildTestServer(backend, { GC_INTERVAL: '0' });
    });
    after(async () => t?.close());

    it('when the request was closed after the upload took its place, then the commit is refused with request_not_found and writes nothing', async () => {
      const { prisma } = t.built.db;
      const upload = await uploadThroughRequest(t);
      // Closed behind the service's back: no settling, no cut; only the statement can notice.
      await prisma.fileRequest.update({ where: { id: upload.requestId }, data: { closedAt: new Date() } });
      const err = await refusal(upload.commit());
      expect(err).to.be.instanceOf(UploadEnded);
      expect((err as UploadEnded).code).to.equal('request_not_found');
      expect(await prisma.file.count({ where: { accountId: upload.owner.accountId } })).to.equal(0);
      // The record stays for the caller's abort (which removes the object and gives the slot back).
      expect(await prisma.pendingObject.count({ where: { storageKey: upload.storageKey } })).to.equal(1);
    });

    it('when the request expired after the upload took its place, then the commit is refused with request_expired and writes nothing', async () => {
      const { prisma } = t.built.db;
      const upload = await uploadThroughRequest(t);
      await prisma.fileRequest.update({ where: { id: upload.requestId }, data: { expiresAt: new Date(Date.now() - 1000) } });
      const err = await refusal(upload.commit());
      expect((err as UploadEnded).code).to.equal('request_expired');
      expect(await prisma.file.count({ where: { accountId: upload.owner.accountId } })).to.equal(0);
    });

    it('when the request is open, then the commit saves the file with its request_id', async () => {
      const upload = await uploadThroughRequest(t);
      const file = await upload.commit();
      expect(file.requestId).to.equal(upload.requestId);
    });
  });
}

describeWithPostgres('file requests: a commit racing a close waits for it under the request row lock (PostgreSQL)', function () {
  this.timeout(30_000);
  let t: BuiltTestServer;
  let url: string;
  let drop: () => Promise<void>;
  before(async () => {
    ({ url, drop } = await createTestDatabase());
    t = await buildTestServer('postgresql', { DATABASE_URL: url, GC_INTERVAL: '0' });
  });
  after(async () => {
    await t?.close();
    await drop?.();
  });

  it('when a close holds the request row, then the commit waits for it and, once the close commits, is refused and writes nothing', async () => {
    const upload = await uploadThroughRequest(t);
    const closer = new pg.Client({ connectionString: url, application_name: 'closer' });
    await closer.connect();
    try {
      await closer.query('BEGIN');
      await closer.query('UPDATE file_requests SET closed_at = now() WHERE id = $1', [upload.requestId]);
      const committing = refusal(upload.commit());
      // The commit is waiting on the request's row, not done before the close.
      const waiting = await eventually(
        async () => (await closer.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name <> 'closer'`)).rows[0].n as number,
        (n) => n > 0,
      );
      expect(waiting).to.equal(1);
      await closer.query('COMMIT');
      const err = await committing;
      expect((err as UploadEnded).code).to.equal('request_not_found');
      expect(await t.built.db.prisma.file.count({ where: { accountId: upload.owner.accountId } })).to.equal(0);
    } finally {
      await closer.end();
    }
  });
});
