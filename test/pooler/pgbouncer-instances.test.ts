// Two instances behind PgBouncer in transaction mode with its default
// settings (issue 58), DATABASE_URL through the pooler and
// DATABASE_DIRECT_URL to PostgreSQL itself, no Redis: what needs a session
// (migrations' advisory lock, the notice carrier's LISTEN) goes direct, the
// rest through the pooler. The paths that matter: both starting at once on
// an empty database, uploads (plain, and tus with a takeover across the
// instances), a revoked link reaching the other instance's download, and
// the sweeper run on both at once.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import pg from 'pg';
import { Upload } from 'tus-js-client';
import { LocalObjectStore } from '../../src/storage/local.js';
import { migrationsDir } from '../../src/db/migrate.js';
import { call, upload } from '../helpers/client.js';
import { createTestDatabase } from '../helpers/databases.js';
import { describeWithPgBouncer, startPgBouncer, type PgBouncer } from '../helpers/pgbouncer.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { trickle, type Trickle } from '../helpers/trickle.js';
import { create, download, leased, patch, streamingPatch, uploadUrl } from '../helpers/tus.js';

const MiB = 1024 * 1024;
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Well under the live downloads' check (3 s): an end this quick came by the notice. */
const NOTICE_MS = 1500;

/** Files under `dir`, as paths relative to it (none when it does not exist). */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => relative(dir, join(e.parentPath, e.name)));
}

async function direct<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** tus-js-client with its default retry delays; resolves with the upload URL. */
function tusUpload(data: Buffer, endpoint: string, apiKey: string, uploadUrl?: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const upload = new Upload(data, {
      endpoint,
      uploadUrl,
      headers: { Authorization: `Bearer ${apiKey}` },
      metadata: { filename: 'big.bin' },
      onError: reject,
      onSuccess: () => resolve(upload.url!),
    });
    upload.start();
  });
}

describeWithPgBouncer('two instances behind PgBouncer in transaction mode, with DATABASE_DIRECT_URL', function () {
  this.timeout(120_000);
  let bouncer: PgBouncer;
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let dataDir: string;
  let a: TestServer;
  let b: TestServer;
  let key: string;
  const downloads: Trickle[] = [];

  before(async () => {
    database = await createTestDatabase();
    bouncer = await startPgBouncer();
    // One local store for both, through one folder, as a network file system would share it.
    dataDir = await mkdtemp(join(tmpdir(), 'dropstream-pooled-'));
    const env = {
      DATABASE_URL: bouncer.through(database.url),
      DATABASE_DIRECT_URL: database.url,
      DATA_DIR: dataDir,
      ADMIN_TOKEN: 'pooled-instances-admin-token-0123456789',
      GC_INTERVAL: '0',
    };
    // At once, on an empty database: both find every migration pending.
    [a, b] = await Promise.all([startTestServer('postgresql', env), startTestServer('postgresql', env)]);
    key = (await a.account()).apiKey;
  });
  afterEach(() => downloads.splice(0).forEach((d) => d.close()));
  after(async () => {
    await a?.close();
    await b?.close();
    await bouncer?.stop();
    await database?.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('when both start at once on an empty database, then each migration is applied once, through the direct URL: no advisory lock is left held on a server connection of the pooler', async () => {
    const folders = (await readdir(migrationsDir, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name).sort();
    const { applied, locks } = await direct(database.url, async (c) => ({
      applied: (await c.query('SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL ORDER BY migration_name')).rows.map((r) => r.migration_name as string),
      locks: (await c.query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")).rows[0].n as number,
    }));
    expect(applied).to.deep.equal(folders);
    expect(locks, 'advisory locks held').to.equal(0);
    for (const t of [a, b]) expect((await call(t.url('/readyz'))).status).to.equal(200);
  });

  it('when a file is uploaded on one instance, then the other serves it, byte for byte', async () => {
    const content = randomBytes(3 * MiB);
    const res = await upload(a.server.url, key, [{ name: 'file', filename: 'plain.bin', content }]);
    expect(res.status, res.text).to.equal(201);
    expect(sha(await download(b, res.body.public_link))).to.equal(sha(content));
  });

  it("when a tus upload's PATCH hangs on A and tus-js-client resumes through B, then B has A's PATCH let go (a notice over the direct LISTEN) and the upload finishes", async () => {
    const data = randomBytes(12 * MiB);
    const path = (await create(a.server.url, key, { length: data.length })).headers.get('location')!;
    const hanging = streamingPatch(a.server.url + path, key, 0, data.length);
    await hanging.send(data.subarray(0, 4 * MiB));
    await leased(a, a.server.url + path);
    const resumed = tusUpload(data, `${b.server.url}/api/v1/uploads`, key, b.server.url + path);
    // Well within RESUMABLE_TAKEOVER_TIMEOUT (10 s): without the notice, B would wait it out for a 409.
    const ended = await Promise.race([hanging.response.then(() => true), sleep(8_000).then(() => false)]);
    expect(ended, "A's PATCH still holds the upload").to.equal(true);
    const url = await resumed;
    const answer = await call(url, { key });
    expect(answer.body.file, JSON.stringify(answer.body)).to.not.equal(null);
    expect(sha(await download(b, answer.body.file.public_link))).to.equal(sha(data));
  });

  it(`when a link is revoked on A, then its download on B ends within ${NOTICE_MS} ms (the notice), long before its last byte`, async () => {
    const size = 32 * MiB;
    const res = await upload(a.server.url, key, [{ name: 'file', filename: 'big.bin', content: randomBytes(size) }]);
    expect(res.status).to.equal(201);
    const slow = trickle(b.url(res.body.public_link), 50);
    downloads.push(slow);
    await slow.started;
    const links = (await call(a.url(`/api/v1/files/${res.body.file_id}/links`), { key })).body.links;
    const revoked = Date.now();
    expect((await call(a.url(`/api/v1/files/${res.body.file_id}/links/${links[0].link_id}`), { method: 'DELETE', key })).status).to.equal(200);
    const ended = await slow.endedWithin(NOTICE_MS);
    expect(ended, 'the download still runs').to.not.equal(undefined);
    expect(ended!.at - revoked).to.be.below(NOTICE_MS);
    expect(ended!.bytes).to.be.below(size / 2);
  });

  it('when both instances sweep at once, then every object of a deleted file and an expired tus upload are removed once, with their records', async () => {
    const store = new LocalObjectStore({ root: join(dataDir, 'objects') });
    const keys = ['a', 'b', 'c'].map((k) => `pooled-sweep/${k}`);
    for (const storageKey of keys) {
      await store.put(storageKey, Readable.from([Buffer.from(storageKey)]));
      await a.server.db.prisma.pendingObject.create({ data: { storageKey, reason: 'delete' } });
    }
    const url = uploadUrl(a.server.url, await create(a.server.url, key, { length: 2 * MiB }));
    expect((await patch(url, key, 0, randomBytes(MiB))).status).to.equal(204);
    const id = decodeURIComponent(new URL(url).pathname.split('/').pop()!);
    // Its Upload-Expires passed (the clock moved on): the sweep's to remove.
    await direct(database.url, (c) => c.query("UPDATE resumable_uploads SET expires_at = now() - interval '1 minute' WHERE id = $1", [id]));
    // (The servers' DATA_DIR is the shared folder, not their TestServer's own.)
    expect(await filesUnder(join(dataDir, 'objects'))).to.include.members(keys);
    const tempFiles = () => filesUnder(join(dataDir, 'objects', '.tmp'));
    const tempBefore = (await tempFiles()).length;
    expect(tempBefore).to.be.at.least(1);

    const [byA, byB] = await Promise.all([a.admin('POST', '/admin/gc', {}), b.admin('POST', '/admin/gc', {})]);
    expect([byA.failed, byB.failed]).to.deep.equal([0, 0]);
    expect(byA.deletes + byB.deletes).to.equal(3);
    expect(byA.uploads + byB.uploads).to.equal(1);
    const objects = await filesUnder(join(dataDir, 'objects'));
    for (const storageKey of keys) expect(objects).to.not.include(storageKey);
    expect(await a.server.db.prisma.pendingObject.count({ where: { storageKey: { in: keys } } })).to.equal(0);
    expect(await a.server.db.prisma.resumableUpload.count({ where: { id } })).to.equal(0);
    expect((await tempFiles()).length).to.equal(tempBefore - 1);
  });
});
