// The production setup's backup, as docs/operating.md (Backups) tells it,
// taken from a server that keeps taking uploads and deletes throughout:
//   1. `pg_dump --format=custom` of the database,
//   2. then a copy of the bucket's objects (`aws s3 sync`, `mc mirror`,
//      `rclone copy`; here the SDK, listing and getting every object),
// and restored into a new database (`pg_restore`) and a new bucket; a server
// started on them must serve every file the backup promised with its SHA-256.
// The dump first: every row it holds names an object that existed when it
// began, so the copy made after it has it, unless the file was deleted while
// the backup ran. What the restore holds beyond that is reported (as
// `dropstream gc` would settle it): objects of uploads that came after the
// dump, uploads in flight when it began.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { call } from '../helpers/client.js';
import { create, head, patch } from '../helpers/tus.js';
import { createTestDatabase, describeWithPostgres } from '../helpers/databases.js';
import { notRun } from '../helpers/not-run.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { BackupTraffic, expectRestored, restoreReport } from './backup-traffic.js';

const run = promisify(execFile);
const MiB = 1024 * 1024;

/** pg_dump and pg_restore of the newest installed PostgreSQL (a dump needs a pg_dump at least as new as the server). */
function postgresTool(name: 'pg_dump' | 'pg_restore'): string | undefined {
  const lib = '/usr/lib/postgresql';
  const versions = existsSync(lib) ? readdirSync(lib).sort((a, b) => parseFloat(b) - parseFloat(a)) : [];
  return versions.map((v) => join(lib, v, 'bin', name)).find((path) => existsSync(path)) ?? ['/usr/bin', '/bin'].map((d) => join(d, name)).find((p) => existsSync(p));
}
const pgDump = postgresTool('pg_dump');
const pgRestore = postgresTool('pg_restore');

async function listKeys(client: S3Client, bucket: string): Promise<string[]> {
  const keys: string[] = [];
  for (let token: string | undefined; ; ) {
    const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }));
    keys.push(...(page.Contents ?? []).map((o) => o.Key!));
    if (!page.IsTruncated) return keys.sort();
    token = page.NextContinuationToken;
  }
}

/** Every object of `bucket` into `dir` (a key's slashes become folders), as `aws s3 sync s3://bucket dir` does. */
async function copyBucketOut(client: S3Client, bucket: string, dir: string): Promise<string[]> {
  const keys = await listKeys(client, bucket);
  for (const key of keys) {
    // An object deleted between the listing and its GET is not in the copy (as a sync would skip it).
    const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key })).catch((err: { name?: string }) => {
      if (err.name === 'NoSuchKey') return undefined;
      throw err;
    });
    if (!got) continue;
    await mkdir(dirname(join(dir, key)), { recursive: true });
    await writeFile(join(dir, key), await got.Body!.transformToByteArray());
  }
  return keys;
}

/** The copied objects into a new `bucket`, as `aws s3 mb` and `aws s3 sync dir s3://bucket` do. */
async function copyBucketIn(client: S3Client, dir: string, bucket: string): Promise<void> {
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  const walk = (folder: string, prefix = ''): string[] =>
    readdirSync(folder, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(folder, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`]));
  for (const key of existsSync(dir) ? walk(dir) : []) await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: await readFile(join(dir, key)) }));
}

describeWithPostgres('backup and restore: PostgreSQL (pg_dump, then the bucket) while uploads and deletes go on', function () {
  this.timeout(180_000);
  if (!pgDump || !pgRestore) {
    if (process.env.CI) throw new Error('CI must have pg_dump and pg_restore (Debian: postgresql-client) for the backup test');
    notRun('pg_dump or pg_restore is not installed: "backup and restore: PostgreSQL"', 'apt-get install postgresql-client, then npm test');
    return;
  }
  let s3: TestS3;
  let client: S3Client;
  let live: TestServer;
  let restored: TestServer | undefined;
  let restoredDb: { url: string; drop(): Promise<void> };
  let work: string;
  let key: string;
  let traffic: BackupTraffic;
  let liveDb: { url: string; drop(): Promise<void> };
  let bucket: string;
  let restoreBucket: string;

  before(async () => {
    s3 = await startTestS3();
    client = new S3Client({ endpoint: s3.endpoint, region: s3.region, credentials: s3.credentials, forcePathStyle: true });
    bucket = s3.bucket('backup-live');
    restoreBucket = s3.bucket('backup-restored');
    work = await mkdtemp(join(tmpdir(), 'dropstream-backup-'));
    // GC_INTERVAL=0: nothing settles the live server's records behind the test.
    liveDb = await createTestDatabase();
    live = await startTestServer('postgresql', { ...s3.env(bucket), DATABASE_URL: liveDb.url, S3_PART_SIZE: String(5 * MiB), GC_INTERVAL: '0' });
    ({ apiKey: key } = await live.account());
    traffic = new BackupTraffic(() => live.server.url, key, () => live.server.db.prisma);
    for (let i = 0; i < 12; i++) await traffic.upload(i === 0 ? 11 * MiB : 5000 + i * 3000);
    for (const file of [...traffic.files.values()].slice(1, 3)) await traffic.delete(file);
  });

  after(async () => {
    await traffic?.stop();
    await restored?.close();
    await restoredDb?.drop();
    await live?.close();
    await liveDb?.drop();
    client?.destroy();
    await s3?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  let tusPath: string;
  const tusData = randomBytes(7 * MiB);

  it('when the database is dumped and then the bucket copied while uploads and deletes go on, and both are restored into a new database and bucket, then every file the backup promised downloads with its SHA-256', async () => {
    // A tus upload half sent when the backup begins: its parts are an open multipart upload, which no copy of objects holds.
    const created = await create(live.server.url, key, { length: tusData.length, filename: 'tus-in-flight.bin' });
    tusPath = String(created.headers.get('location'));
    expect((await patch(live.server.url + tusPath, key, 0, tusData.subarray(0, 5 * MiB))).status).to.equal(204);
    traffic.start();
    await new Promise((r) => setTimeout(r, 300));
    traffic.phase = 'during';
    // 1. The database. --format=custom: one consistent snapshot, restored with pg_restore.
    await run(pgDump!, ['--format=custom', '--file', join(work, 'db.dump'), liveDb.url]);
    // 2. Then the objects.
    const copied = await copyBucketOut(client, bucket, join(work, 'objects'));
    traffic.phase = 'after';
    await new Promise((r) => setTimeout(r, 300));
    await traffic.stop();
    expect(traffic.unexpected).to.deep.equal([]);

    restoredDb = await createTestDatabase();
    await run(pgRestore!, ['--no-owner', '--no-privileges', '--exit-on-error', '--dbname', restoredDb.url, join(work, 'db.dump')]);
    await copyBucketIn(client, join(work, 'objects'), restoreBucket);
    restored = await startTestServer('postgresql', { ...s3.env(restoreBucket), DATABASE_URL: restoredDb.url, GC_INTERVAL: '0' });
    const report = await restoreReport(restored.server.db.prisma, await listKeys(client, restoreBucket));
    console.log(`      copied ${copied.length} objects; restored ${report.rows.length} files; rows without objects (deleted during the backup): ${report.rowsWithoutObjects.length}; objects without rows (uploaded during it): ${report.objectsWithoutRows.length}; pending records: ${report.pending.map((p) => p.reason).join(', ') || 'none'}`);
    await expectRestored(restored, key, traffic, report);
  });

  it('when the restored server sweeps (`dropstream gc --grace 0`), then the records of uploads the dump caught in flight are settled and the counters stay right', async () => {
    const gc = await restored!.admin('POST', '/admin/gc', { grace_seconds: 0 });
    console.log(`      gc on the restore: ${JSON.stringify(gc)}`);
    const report = await restoreReport(restored!.server.db.prisma, await listKeys(client, restoreBucket));
    expect(report.pending.filter((p) => p.reason !== 'resumable')).to.deep.equal([]);
    const stats = await call(restored!.url('/api/v1/stats'), { key });
    expect(stats.body.stats.total_files).to.equal(report.rows.length);
  });

  it('when a tus upload begun before the backup is continued on the restore, then it cannot finish (its parts were an open multipart upload, which no copy of objects holds): 503 or 4xx, never a 500, and no file', async () => {
    const url = restored!.url(tusPath);
    const offset = Number((await head(url, key)).headers.get('upload-offset'));
    expect(offset, "the restore's record of the upload").to.equal(5 * MiB);
    const rest = await patch(url, key, offset, tusData.subarray(offset));
    expect(rest.status === 503 || (rest.status >= 400 && rest.status < 500), `PATCH answered ${rest.status} ${rest.text}`).to.equal(true);
    const files = await call(restored!.url('/api/v1/files?limit=100'), { key });
    expect(files.body.files.map((f: { filename: string }) => f.filename)).to.not.include('tus-in-flight.bin');
  });
});
