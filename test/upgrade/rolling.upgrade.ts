// A rolling upgrade from the last release to this commit, and a rollback,
// with traffic flowing (issue 53; run by .ci/upgrade, not by `npm test`: it
// builds the release first). The last release is the newest tag vX.Y.Z, or
// CHANGELOG.md's newest heading's commit (test/helpers/releases.ts);
// UPGRADE_FROM=<commit> starts from another commit instead.
//
// Instances of both versions run as the compose stack runs its replicas:
// one PostgreSQL database, one Redis, one bucket (s3rver in this process, or
// TEST_S3_ENDPOINT), requests spread over the live ones. The steps:
//   1. the release alone on a new database: account, webhook, file request,
//      uploads, a tus upload begun;
//   2. an instance of this commit starts while background traffic runs:
//      it migrates under the migration lock while the old one serves; tus
//      uploads cross from old to new and from new to old;
//   3. the old instance is retired (SIGTERM) with a download and an upload
//      in flight on it, which finish during its drain; a new one replaces it;
//   4. a rollback: an old instance again, on the migrated schema, beside the
//      new one, which is retired; tus crosses both ways once more;
//   5. checks, with no `dropstream gc`: no 5xx and no error logged; every
//      file listed is one sent, with its SHA-256 (downloaded, and as the
//      database recorded it) and nothing else; bucket = database = /stats;
//      download counts, daily uploads and webhook events exact.
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { ListMultipartUploadsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import pg from 'pg';
import { migrationsDir } from '../../src/db/migrate.js';
import { createTestDatabase } from '../helpers/databases.js';
import { eventually } from '../helpers/raw-upload.js';
import { buildRelease } from '../helpers/release-build.js';
import { migrationsAt, repositoryRoot } from '../helpers/releases.js';
import { ROOMY_PLAN, ROOMY_PLAN_FIELDS } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { Fleet, type Instance, send, sha256 } from './fleet.js';
import { origin } from './origin.js';
import { Client, Ledger, openUpload, slowDownload, Traffic, type FileFact } from './traffic.js';

const MiB = 1024 * 1024;
const ADMIN_TOKEN = randomBytes(32).toString('hex');
const PUBLIC_URL = 'http://files.test';

describe('rolling upgrade from the last release, and back (two versions on one database, Redis and bucket)', function () {
  this.timeout(600_000);
  const from = origin();
  const ledger = new Ledger();
  let s3: TestS3;
  let bucket: string;
  let db: { url: string; drop(): Promise<void> };
  let sql: pg.Client;
  let receiver: Receiver;
  let fleet: Fleet;
  let client: Client;
  let traffic: Traffic;
  let accountId: number;
  let uploadLink: string;
  let big: FileFact;
  const instances: Record<string, Instance> = {};

  before(async function () {
    console.log(`      upgrading from ${from.label}: commit ${from.commit.slice(0, 12)}`);
    const oldRoot = await buildRelease(from.commit, (line) => console.log(`      ${line}`));
    // This checkout runs from dist/: build it when its sources changed (instant otherwise).
    const built = spawnSync(process.execPath, ['scripts/build.mjs', '--if-needed'], { cwd: repositoryRoot, stdio: 'inherit' });
    if (built.status !== 0) throw new Error('building this checkout failed');
    s3 = await startTestS3();
    bucket = s3.bucket('upgrade');
    db = await createTestDatabase();
    sql = new pg.Client({ connectionString: db.url });
    await sql.connect();
    receiver = await startReceiver();
    fleet = new Fleet(
      {
        ...s3.env(bucket),
        S3_PART_SIZE: String(5 * MiB),
        DATABASE_URL: db.url,
        REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
        REDIS_KEY_PREFIX: `upgrade-${randomBytes(4).toString('hex')}`,
        ADMIN_TOKEN,
        PUBLIC_URL,
        // Nothing repairs behind the test's back: no sweep, no counter fix.
        GC_INTERVAL: '0',
        SHUTDOWN_TIMEOUT: '30',
        WEBHOOK_ALLOW_PRIVATE: 'true',
      },
      oldRoot,
    );
  });

  after(async () => {
    await traffic?.stop();
    await fleet?.close();
    await sql?.end().catch(() => {});
    await db?.drop();
    await receiver?.close();
    await s3?.close();
  });

  it('when the last release starts alone on a new database, then it serves an account, a webhook, a file request, uploads and a tus upload begun', async () => {
    const old1 = (instances.old1 = await fleet.start('old-1', 'old'));
    const admin = (method: string, path: string, body: unknown) =>
      fleet.call(path, { method, headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' }, body: Buffer.from(JSON.stringify(body)) }, { ...old1, url: old1.adminUrl });
    expect((await admin('PUT', `/admin/plans/${ROOMY_PLAN}`, ROOMY_PLAN_FIELDS)).status).to.equal(200);
    const account = await admin('POST', '/admin/accounts', { plan: ROOMY_PLAN });
    expect(account.status).to.equal(201);
    accountId = account.json.account_id;
    client = new Client(fleet, ledger, account.json.api_key);

    const hook = await client.api('POST', '/api/v1/webhooks', { url: receiver.url, events: ['file.uploaded', 'file.deleted', 'file.downloaded', 'link.exhausted', 'upload.expired'] });
    expect(hook.status, hook.body.toString()).to.equal(201);
    receiver.secrets = [hook.json.webhook.secret];
    const request = await client.api('POST', '/api/v1/requests', { title: 'upgrade' });
    expect(request.status, request.body.toString()).to.equal(201);
    uploadLink = request.json.request.upload_link;

    for (let i = 0; i < 3; i++) await client.upload(`first-${i}.bin`, randomBytes(100_000 + i), old1);
    big = (await client.upload('big.bin', randomBytes(16 * MiB), old1))!;
    // Read by the drain step: the workers never delete it.
    big.busy++;
    await client.requestUpload(uploadLink, 'request-old-1.bin', randomBytes(300_000), old1);
    expect(ledger.unexpected).to.deep.equal([]);
  });

  it('when an instance of this commit starts while the old one serves traffic, then it applies the new migrations and tus uploads cross between versions both ways', async () => {
    traffic = new Traffic(client);
    traffic.start(2);
    const old1 = instances.old1!;
    // A tus upload begun on the old version before the new one exists.
    const early = randomBytes(12 * MiB + 17);
    const earlyPath = await client.tusCreate('tus-old-to-new.bin', early.length, old1);
    expect(client.ledger.expect('tus PATCH 1 of tus-old-to-new.bin', await client.tusPatch(earlyPath, early, 0, 6 * MiB, old1), 204)).to.equal(true);

    const new1 = (instances.new1 = await fleet.start('new-1', 'new'));
    const released = new Set(migrationsAt(from.commit).map((m) => m.name));
    const added = readdirSync(migrationsDir, { withFileTypes: true }).filter((e) => e.isDirectory() && !released.has(e.name)).map((e) => e.name).sort();
    const applied = new1.process.stdoutLines.map((l) => JSON.parse(l)).find((e) => e.msg === 'applied migrations')?.migrations ?? [];
    expect(applied, 'the migrations added since the release, applied by the new instance at its start').to.deep.equal(added);
    console.log(`      new migrations applied while ${old1.name} served: ${added.length ? added.join(', ') : 'none'}`);

    await client.tusFinish('tus-old-to-new.bin', earlyPath, early, 6 * MiB, new1);
    await client.tusAcross('tus-new-to-old.bin', randomBytes(11 * MiB + 5), new1, old1);
    await client.requestUpload(uploadLink, 'request-new-1.bin', randomBytes(200_000), new1);
    await client.requestUpload(uploadLink, 'request-old-1b.bin', randomBytes(200_000), old1);
    // A link with a download budget, made on the new version, spent on both.
    const first = ledger.files.find((f) => f.name === 'first-0.bin')!;
    first.busy++;
    const link = await client.api('POST', `/api/v1/files/${first.id}/links`, { max_downloads: 2 }, new1);
    expect(link.status, link.body.toString()).to.equal(201);
    await client.download(first, link.json.link.public_link, old1);
    await client.download(first, link.json.link.public_link, new1);
    ledger.linkExhausted++;
    const spent = await fleet.call(link.json.link.public_link, {}, old1);
    expect(spent.status, 'a third download of a two-download link').to.equal(410);
    first.busy--;
    expect(ledger.unexpected).to.deep.equal([]);
  });

  it('when the old instance is retired (SIGTERM) with a download and an upload in flight on it, then both finish during its drain, it exits 0, and a new instance takes its place', async () => {
    const old1 = instances.old1!;
    const reading = slowDownload(old1.url + new URL(big.link!).pathname, 4 * MiB, MiB);
    const data = randomBytes(3 * MiB);
    const sending = openUpload(old1.url, client.key, 'during-drain.bin', data, MiB);
    // A tus upload left half done by the instance that goes.
    const left = randomBytes(10 * MiB + 3);
    const leftPath = await client.tusCreate('tus-left-by-old.bin', left.length, old1);
    expect(client.ledger.expect('tus PATCH 1 of tus-left-by-old.bin', await client.tusPatch(leftPath, left, 0, 5 * MiB, old1), 204)).to.equal(true);
    expect(await eventually(async () => reading.state.received, (n) => n >= MiB, 60_000), 'bytes of the download read before the retirement').to.be.at.least(MiB);

    const exited = fleet.retire(old1);
    exited.catch(() => {});
    // The drain has begun (the listener no longer accepts) while both are in flight.
    const refused = await eventually(async () => send(`${old1.url}/healthz`).then(() => false, () => true), (no) => no, 180_000);
    expect(refused, 'the retired instance stopped accepting').to.equal(true);
    expect(reading.state.received, 'the download is still in flight when the drain begins').to.be.below(big.size);
    reading.release();
    const uploaded = await sending.finish();
    expect(uploaded.status, JSON.stringify(uploaded.json)).to.equal(201);
    ledger.add({ name: 'during-drain.bin', kind: 'plain', sha256: sha256(data), size: data.length, id: uploaded.json.file_id, link: uploaded.json.public_link });
    fleet.answers.push({ instance: old1.name, method: 'POST', path: '/api/v1/files/upload', status: uploaded.status });
    const downloaded = await reading.done;
    fleet.answers.push({ instance: old1.name, method: 'GET', path: '/download/:id', status: downloaded.status });
    expect(downloaded).to.deep.equal({ status: 200, size: big.size, sha256: big.sha256 });
    big.downloads++;
    expect(await exited, 'exit code of the retired instance').to.equal(0);

    const new2 = (instances.new2 = await fleet.start('new-2', 'new'));
    await client.tusFinish('tus-left-by-old.bin', leftPath, left, 5 * MiB, new2);
    expect(ledger.unexpected).to.deep.equal([]);
  });

  it('when one release is rolled back (an old instance on the migrated schema beside a new one), then uploads, downloads, deletes and tus in both directions go on', async () => {
    const old2 = (instances.old2 = await fleet.start('old-2', 'old'));
    expect(await fleet.retire(instances.new1!), 'exit code of the retired instance').to.equal(0);
    const new2 = instances.new2!;
    await client.tusAcross('tus-rollback-new-to-old.bin', randomBytes(10 * MiB + 11), new2, old2);
    await client.tusAcross('tus-rollback-old-to-new.bin', randomBytes(10 * MiB + 13), old2, new2);
    await client.requestUpload(uploadLink, 'request-old-2.bin', randomBytes(100_000), old2);
    // Let the workers go on a while on this pair.
    const at = traffic.iterations;
    await eventually(async () => traffic.iterations, (n) => n >= at + 20, 120_000);
    await traffic.stop();
    expect(ledger.unexpected).to.deep.equal([]);
    console.log(`      ${traffic.iterations} background steps; ${ledger.files.length} files uploaded, ${ledger.files.filter((f) => f.deleted).length} deleted`);
  });

  it('then no answer was a 5xx, no request went unanswered, and no instance logged an error', () => {
    expect(fleet.answers.filter((a) => a.status >= 500)).to.deep.equal([]);
    expect(fleet.failures).to.deep.equal([]);
    expect(fleet.serverErrors()).to.deep.equal([]);
    const byVersion = (version: string) => fleet.answers.filter((a) => fleet.all.find((i) => i.name === a.instance)?.version === version).length;
    expect(byVersion('old'), 'answers from old instances').to.be.greaterThan(20);
    expect(byVersion('new'), 'answers from new instances').to.be.greaterThan(20);
  });

  it('then the files listed are exactly the ones sent and not deleted, each with its SHA-256 as downloaded and as the database recorded it', async () => {
    const listed: any[] = [];
    for (let page = 1; ; page++) {
      const answer = await client.api('GET', `/api/v1/files?page=${page}&limit=100`);
      expect(answer.status).to.equal(200);
      listed.push(...answer.json.files);
      if (page >= answer.json.pagination.pages) break;
    }
    for (const fact of ledger.files.filter((f) => f.id === undefined)) fact.id = listed.find((f) => f.filename === fact.name)?.file_id;
    const live = ledger.live;
    expect(listed.map((f) => f.file_id).sort()).to.deep.equal(live.map((f) => f.id).sort());
    const rows = (await sql.query<{ id: number; sha256: string; size: string }>('SELECT id, sha256, size FROM files WHERE account_id = $1', [accountId])).rows;
    const recorded = new Map(rows.map((r) => [r.id, r]));
    for (const fact of live) {
      expect(recorded.get(fact.id!)?.sha256, `the database's SHA-256 of ${fact.name}`).to.equal(fact.sha256);
      expect(Number(recorded.get(fact.id!)?.size), `the database's size of ${fact.name}`).to.equal(fact.size);
    }
    // Four at a time, over the two instances left.
    const queue = [...live];
    await Promise.all(
      [0, 1, 2, 3].map(async () => {
        for (let fact = queue.shift(); fact; fact = queue.shift()) {
          await client.download(fact, listed.find((f) => f.file_id === fact!.id).public_link as string);
        }
      }),
    );
    expect(ledger.unexpected, 'every file downloads with its SHA-256').to.deep.equal([]);
  });

  it('then the bucket holds exactly the objects of the files in the database, nothing pending and no multipart upload open; /stats and the counters agree, with no gc', async () => {
    const s3client = new S3Client({ endpoint: s3.endpoint, region: s3.region, credentials: s3.credentials, forcePathStyle: true });
    const keys: string[] = [];
    for (let token: string | undefined; ; ) {
      const page = await s3client.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }));
      keys.push(...(page.Contents ?? []).map((o) => o.Key!));
      if (!page.IsTruncated) break;
      token = page.NextContinuationToken;
    }
    const open = (await s3client.send(new ListMultipartUploadsCommand({ Bucket: bucket }))).Uploads ?? [];
    s3client.destroy();
    const fileKeys = (await sql.query<{ storage_key: string }>('SELECT storage_key FROM files')).rows.map((r) => r.storage_key);
    const pending = (await sql.query('SELECT storage_key, reason FROM pending_objects')).rows;
    expect(keys.sort(), 'objects in the bucket = the files table').to.deep.equal(fileKeys.sort());
    expect(pending, 'pending_objects').to.deep.equal([]);
    expect(open.map((u) => u.Key), 'open multipart uploads').to.deep.equal([]);

    const live = ledger.live;
    const stats = await client.api('GET', '/api/v1/stats');
    expect(stats.json.stats).to.deep.include({ total_files: live.length, total_size: live.reduce((sum, f) => sum + f.size, 0) });
    const [counters] = (await sql.query<{ file_count: number; total_bytes: string; reserved_bytes: string }>('SELECT file_count, total_bytes, reserved_bytes FROM accounts WHERE id = $1', [accountId])).rows;
    expect({ files: counters!.file_count, bytes: Number(counters!.total_bytes), reserved: Number(counters!.reserved_bytes) }).to.deep.equal({
      files: live.length,
      bytes: live.reduce((sum, f) => sum + f.size, 0),
      reserved: 0,
    });
  });

  it('then download counts, daily uploads and webhook events (uploaded, deleted, downloaded, link exhausted) are exact', async () => {
    const counts = async () => {
      const out = new Map<number, number>();
      for (let page = 1; ; page++) {
        const answer = await client.api('GET', `/api/v1/files?page=${page}&limit=100`);
        for (const f of answer.json.files) out.set(f.file_id, f.download_count);
        if (page >= answer.json.pagination.pages) return out;
      }
    };
    const expected = new Map(ledger.live.map((f) => [f.id!, f.downloads]));
    const seen = await eventually(counts, (c) => [...expected].every(([id, n]) => c.get(id) === n), 15_000);
    expect(Object.fromEntries(seen)).to.deep.equal(Object.fromEntries(expected));

    const [daily] = (await sql.query<{ n: string }>('SELECT coalesce(sum(count), 0) AS n FROM daily_uploads WHERE account_id = $1', [accountId])).rows;
    expect(Number(daily!.n), 'daily uploads taken (uploads never give theirs back)').to.equal(ledger.files.length);

    const want = {
      'file.uploaded': ledger.files.length,
      'file.deleted': ledger.files.filter((f) => f.deleted).length,
      'file.downloaded': ledger.files.reduce((sum, f) => sum + f.downloads, 0),
      'link.exhausted': ledger.linkExhausted,
    };
    const tally = () => {
      const unique = new Map(receiver.received.map((r) => [r.id, r]));
      const byType: Record<string, number> = {};
      for (const r of unique.values()) byType[r.event.type] = (byType[r.event.type] ?? 0) + 1;
      return byType;
    };
    // Delivered by the relay of whichever instance claims them (a poll a second); the last instances still run.
    const got = await eventually(async () => tally(), (t) => Object.entries(want).every(([type, n]) => (t[type] ?? 0) >= n), 60_000);
    expect(got).to.deep.equal(want);
    expect(receiver.received.every((r) => r.verified[0]), 'every delivery signed with the endpoint secret').to.equal(true);
  });
});
