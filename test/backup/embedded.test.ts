// The embedded default's backup (PGlite and the local store, both in
// DATA_DIR), as docs/operating.md (Backups) tells it: stop the server (SIGTERM:
// it drains, finishing the uploads in flight), copy DATA_DIR (`cp -a`), start
// again. The copy, started elsewhere as a new DATA_DIR, must serve every file
// that was answered 201 with its SHA-256, and finish a tus upload begun
// before the stop (its bytes are in DATA_DIR/objects/.tmp, so they travel too).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { startServer, type RunningServer } from '../../src/start.js';
import { call } from '../helpers/client.js';
import { prepareTestServer, ROOMY_PLAN, ROOMY_PLAN_FIELDS, startTestServer, type TestServer } from '../helpers/server.js';
import { create, patch } from '../helpers/tus.js';
import { sha256 } from '../upgrade/fleet.js';
import { BackupTraffic, expectRestored, restoreReport } from './backup-traffic.js';

const run = promisify(execFile);
const MiB = 1024 * 1024;

/** The object keys under a local store's root, without its temp folder. */
async function localKeys(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string) => {
    for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== '.tmp' || dir !== root) await walk(path);
      } else out.push(relative(root, path));
    }
  };
  await walk(root);
  return out.sort();
}

describe('backup and restore: the embedded default (stop, copy DATA_DIR, start) while uploads and deletes go on', function () {
  this.timeout(120_000);
  let live: RunningServer | undefined;
  let cleanUpLive: () => Promise<void>;
  let dataDir: string;
  let restored: TestServer | undefined;
  let work: string;
  let key: string;
  let traffic: BackupTraffic;
  let tusPath: string;
  const tusData = randomBytes(3 * MiB + 7);

  before(async () => {
    work = await mkdtemp(join(process.env.TEST_DATA_ROOT || tmpdir(), 'dropstream-backup-'));
    // SHUTDOWN_IDLE_WAIT as operators run it (the test helpers' 0 closes an
    // idle keep-alive connection at once, and the traffic's next request,
    // already on its way, then crosses the close and is reset unserved).
    const prepared = await prepareTestServer('pglite', { GC_INTERVAL: '0', SHUTDOWN_IDLE_WAIT: '5' });
    cleanUpLive = prepared.cleanUp;
    live = await startServer(prepared.config, prepared.logger);
    const admin = (method: string, path: string, body: unknown) =>
      call(`${live!.adminUrl}${path}`, { method, key: live!.adminToken, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    await admin('PUT', `/admin/plans/${ROOMY_PLAN}`, ROOMY_PLAN_FIELDS);
    key = (await admin('POST', '/admin/accounts', { plan: ROOMY_PLAN })).body.api_key;
    traffic = new BackupTraffic(() => live!.url, key, () => live!.db.prisma);
    traffic.stopOnRefusal = true;
    for (let i = 0; i < 10; i++) await traffic.upload(i === 0 ? 9 * MiB : 4000 + i * 2500);
    for (const file of [...traffic.files.values()].slice(1, 3)) await traffic.delete(file);
    dataDir = prepared.dataDir;
  });

  after(async () => {
    await traffic?.stop();
    await restored?.close();
    await live?.close();
    await cleanUpLive?.();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('when the server is stopped under uploads and deletes, DATA_DIR copied and the copy started as a new DATA_DIR, then every file answered 201 downloads with its SHA-256 and the counters agree', async () => {
    const created = await create(live!.url, key, { length: tusData.length, filename: 'tus-across-backup.bin' });
    tusPath = String(created.headers.get('location'));
    expect((await patch(live!.url + tusPath, key, 0, tusData.subarray(0, MiB))).status).to.equal(204);
    traffic.start();
    await new Promise((r) => setTimeout(r, 300));
    traffic.phase = 'during';
    // 1. Stop: the drain finishes what is in flight; new connections are refused (the traffic ends there).
    await live!.close();
    live = undefined;
    await traffic.stop();
    // 2. Copy, with modes and times (a tar or rsync -a does the same).
    const backup = join(work, 'backup');
    await run('cp', ['-a', dataDir, backup]);
    traffic.phase = 'after';
    expect(traffic.unexpected).to.deep.equal([]);

    // Restore: the copy put in place as another server's DATA_DIR.
    const restoreDir = join(work, 'restored');
    await run('cp', ['-a', backup, restoreDir]);
    restored = await startTestServer('pglite', { DATA_DIR: restoreDir, GC_INTERVAL: '0' });
    const report = await restoreReport(restored.server.db.prisma, await localKeys(join(restoreDir, 'objects')));
    console.log(`      ${report.rows.length} files restored; rows without objects: ${report.rowsWithoutObjects.length}; objects without rows: ${report.objectsWithoutRows.length}; pending records: ${report.pending.map((p) => p.reason).join(', ') || 'none'}`);
    // A stopped server leaves nothing half done: every row has its object, every object its row.
    expect(report.rowsWithoutObjects, 'rows without objects').to.deep.equal([]);
    expect(report.objectsWithoutRows, 'objects without rows').to.deep.equal([]);
    expect(report.pending.map((p) => p.reason), 'pending records: only the tus upload begun').to.deep.equal(['resumable']);
    // The stop is the backup's moment: every upload and delete answered before it is in the copy.
    for (const file of traffic.files.values()) {
      if (file.uploaded === 'during') file.uploaded = 'before';
      if (file.deleted === 'during') file.deleted = 'before';
    }
    await expectRestored(restored, key, traffic, report);
  });

  it('when the tus upload begun before the stop is continued on the restored copy, then it finishes with its SHA-256', async () => {
    const rest = await patch(restored!.url(tusPath), key, MiB, tusData.subarray(MiB));
    expect(rest.status, rest.text).to.equal(204);
    const link = rest.headers.get('dropstream-public-link')!;
    const body = Buffer.from(await (await fetch(restored!.url(link))).arrayBuffer());
    expect(sha256(body)).to.equal(sha256(tusData));
  });
});
