import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { call, uploadFile } from '../helpers/client.js';
import { backends, createTestDatabase } from '../helpers/databases.js';
import { BOUNDARY, multipartType } from '../helpers/multipart.js';
import { eventually } from '../helpers/raw-upload.js';
import { allOpenUploads, startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';

const MiB = 1024 * 1024;

/** Starts an upload, sends `bytes` of its file and leaves it open. */
function startUpload(url: string, key: string, bytes: number): Promise<void> {
  return new Promise((resolve) => {
    const req = request(`${url}/api/v1/files/upload`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': multipartType() },
    });
    req.on('error', () => {});
    req.write(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="doomed.bin"\r\n\r\n`);
    req.write(randomBytes(bytes), () => resolve());
  });
}

describe('crash consistency: local store and PGlite, server killed with SIGKILL', () => {
  let dataDir: string;
  let server: ServerProcess | undefined;
  const tmpFiles = async () => readdir(join(dataDir, 'objects', '.tmp')).catch(() => [] as string[]);

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'dropstream-crash-'));
  });
  after(async () => {
    await server?.kill();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('when the server dies mid-upload, then after a restart `dropstream gc` removes the partial object and gives the quota slot back', async () => {
    server = await startServerProcess({ DATA_DIR: dataDir, GC_INTERVAL: '0' });
    await server.admin('PUT', '/admin/plans/one-a-day', { api_access: true, requests_per_minute: 100, requests_per_day: 100, max_file_size: 100 * MiB, daily_uploads: 1 });
    const { api_key: key } = await server.admin('POST', '/admin/accounts', { plan: 'one-a-day' });
    await startUpload(server.url, key, 2 * MiB);
    expect(await eventually(async () => (await tmpFiles()).length === 1, (met) => met, 10_000)).to.equal(true);
    await server.kill('SIGKILL');
    expect(await tmpFiles()).to.have.length(1);

    server = await startServerProcess({ DATA_DIR: dataDir, GC_INTERVAL: '0' });
    // The dead upload still holds the day's only slot.
    expect((await uploadFile(server.url, key, 'a.txt', 'x')).body.error.code).to.equal('daily_upload_limit');
    const cli = spawnSync(process.execPath, ['bin/dropstream.js', 'gc', '--grace', '0'], {
      env: { ...process.env, ADMIN_URL: server.adminUrl, DATA_DIR: dataDir },
      encoding: 'utf8',
    });
    expect(cli.status).to.equal(0);
    expect(JSON.parse(cli.stdout)).to.deep.equal({ expired: 0, uploads: 1, deletes: 0, strays: 0, orphans: 0, failed: 0, counters_fixed: 0 });
    expect(await tmpFiles()).to.deep.equal([]);
    const stats = await call(`${server.url}/api/v1/stats`, { key });
    expect(stats.body.stats).to.deep.equal({ total_files: 0, total_size: 0, reserved_size: 0 });
    expect((await uploadFile(server.url, key, 'a.txt', 'x')).status).to.equal(201);
    expect(await server.admin('POST', '/admin/gc', { grace_seconds: 0 })).to.deep.include({ uploads: 0, deletes: 0, failed: 0 });
  });

  it('when an upload is recent, then a sweep with the default grace period leaves it alone', async () => {
    const { api_key: key } = await server!.admin('POST', '/admin/accounts', { plan: 'one-a-day' });
    await startUpload(server!.url, key, MiB);
    expect(await eventually(async () => (await tmpFiles()).length === 1, (met) => met, 10_000)).to.equal(true);
    expect(await server!.admin('POST', '/admin/gc', {})).to.deep.include({ uploads: 0 });
    expect(await tmpFiles()).to.have.length(1);
  });
});

if (backends.includes('postgresql')) {
  describe(`crash consistency: S3 (${process.env.TEST_S3_ENDPOINT ? 'TEST_S3_ENDPOINT' : 's3rver'}) and PostgreSQL, server killed with SIGKILL`, () => {
    let s3: TestS3;
    let dataDir: string;
    let db: { url: string; drop(): Promise<void> };
    let server: ServerProcess | undefined;
    let store: S3ObjectStore;
    let bucket: string;
    const env = () => ({ ...s3.env(bucket), DATA_DIR: dataDir, DATABASE_URL: db.url, S3_PART_SIZE: String(5 * MiB), GC_INTERVAL: '0' });
    const bucketKeys = async () =>
      ((await store.client.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key);

    before(async () => {
      s3 = await startTestS3();
      bucket = s3.bucket('crash');
      dataDir = await mkdtemp(join(tmpdir(), 'dropstream-crash-'));
      db = await createTestDatabase();
      store = new S3ObjectStore(s3.storeOptions(bucket));
    });
    after(async () => {
      await server?.kill();
      await store.close();
      await s3.close();
      await db.drop();
      await rm(dataDir, { recursive: true, force: true });
    });

    it('when the server dies mid-multipart-upload, then gc aborts the open multipart upload and nothing remains', async () => {
      server = await startServerProcess(env());
      const { api_key: key } = await server.admin('POST', '/admin/accounts', { plan: 'pro' });
      await startUpload(server.url, key, 12 * MiB);
      expect(await eventually(async () => (await allOpenUploads(store)).length === 1, (met) => met, 10_000)).to.equal(true);
      await server.kill('SIGKILL');

      server = await startServerProcess(env());
      expect(await server.admin('POST', '/admin/gc', { grace_seconds: 0 })).to.deep.include({ uploads: 1, failed: 0 });
      expect(await allOpenUploads(store)).to.deep.equal([]);
      expect(await bucketKeys()).to.deep.equal([]);
      expect((await call(`${server.url}/api/v1/stats`, { key })).body.stats.total_files).to.equal(0);
    });

    it('when a delete cannot reach the store and the server then dies, then the file is gone at once and gc removes its object later', async () => {
      const { api_key: key } = await server!.admin('POST', '/admin/accounts', { plan: 'pro' });
      const up = await uploadFile(server!.url, key, 'keep-then-delete.bin', randomBytes(1000));
      expect(up.status).to.equal(201);
      expect(await bucketKeys()).to.have.length(1);

      await s3.stop();
      const deleted = await call(`${server!.url}/api/v1/files/${up.body.file_id}`, { method: 'DELETE', key });
      expect(deleted.status).to.equal(200);
      expect((await call(`${server!.url}/api/v1/files/${up.body.file_id}`, { key })).status).to.equal(404);
      const link = new URL(up.body.public_link).pathname;
      expect((await call(`${server!.url}${link}`)).status).to.equal(404);
      await server!.kill('SIGKILL');
      await s3.start();
      expect(await bucketKeys()).to.have.length(1);

      server = await startServerProcess(env());
      expect(await server.admin('POST', '/admin/gc', {})).to.deep.include({ deletes: 1, failed: 0 });
      expect(await bucketKeys()).to.deep.equal([]);
    });

    it('when the store is down during a sweep, then the record stays and the next sweep finishes the job', async () => {
      const { api_key: key } = await server!.admin('POST', '/admin/accounts', { plan: 'pro' });
      const up = await uploadFile(server!.url, key, 'x.bin', randomBytes(1000));
      await s3.stop();
      expect((await call(`${server!.url}/api/v1/files/${up.body.file_id}`, { method: 'DELETE', key })).status).to.equal(200);
      expect(await server!.admin('POST', '/admin/gc', {})).to.deep.include({ deletes: 0, failed: 1 });
      await s3.start();
      expect(await server!.admin('POST', '/admin/gc', {})).to.deep.include({ deletes: 1, failed: 0 });
      expect(await bucketKeys()).to.deep.equal([]);
    });

    it('when the schedule is on, then the server sweeps by itself', async () => {
      await server!.kill('SIGKILL');
      const { api_key: key } = await (async () => {
        server = await startServerProcess(env());
        return server.admin('POST', '/admin/accounts', { plan: 'pro' });
      })();
      await startUpload(server!.url, key, 12 * MiB);
      expect(await eventually(async () => (await allOpenUploads(store)).length === 1, (met) => met, 10_000)).to.equal(true);
      await server!.kill('SIGKILL');
      server = await startServerProcess({ ...env(), GC_INTERVAL: '1', GC_GRACE: '1' });
      expect(await eventually(async () => (await allOpenUploads(store)).length === 0, (met) => met, 10_000)).to.equal(true);
      expect(await bucketKeys()).to.deep.equal([]);
    });
  });
}
