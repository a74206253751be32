// The audit trail after a crash (issue 57): uploads and deletes run at once
// while the server is killed (SIGKILL); whatever committed, every file has
// exactly its upload row, every deleted file its delete row, and no row
// names a fact that did not commit (the rows are written by the facts' own
// statements, src/audit/actor.ts).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import pg from 'pg';
import { call, uploadFile } from '../helpers/client.js';
import { backends, createTestDatabase } from '../helpers/databases.js';
import { eventually } from '../helpers/raw-upload.js';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';

if (backends.includes('postgresql')) {
  describe('the audit trail after a crash mid-run (PostgreSQL, SIGKILL)', function () {
    this.timeout(60_000);
    let dataDir: string;
    let db: Awaited<ReturnType<typeof createTestDatabase>>;
    let server: ServerProcess | undefined;
    before(async () => {
      dataDir = await mkdtemp(join(tmpdir(), 'dropstream-audit-crash-'));
      db = await createTestDatabase();
    });
    after(async () => {
      await server?.kill();
      await db.drop();
      await rm(dataDir, { recursive: true, force: true });
    });

    it('when the server is killed while uploads and deletes run, then the audit rows and the files match exactly', async () => {
      server = await startServerProcess({ DATA_DIR: dataDir, DATABASE_URL: db.url, GC_INTERVAL: '0' });
      await server.admin('PUT', '/admin/plans/roomy', { api_access: true, requests_per_minute: 100000, requests_per_day: 100000, max_file_size: 1_000_000, daily_uploads: 100000, concurrent_uploads: 1000 });
      const { account_id: accountId, api_key: key } = await server.admin('POST', '/admin/accounts', { plan: 'roomy' });
      const url = server.url;
      let answered = 0;
      // Each worker uploads a file, then deletes it every other time, until the server is gone.
      const worker = async (w: number) => {
        for (let i = 0; ; i++) {
          const up = await uploadFile(url, key, `w${w}-${i}.txt`, 'x'.repeat(1000)).catch(() => undefined);
          if (!up) return;
          answered++;
          if (i % 2 === 0 && up.status === 201) {
            const del = await call(`${url}/api/v1/files/${up.body.file_id}`, { method: 'DELETE', key }).catch(() => undefined);
            if (!del) return;
          }
        }
      };
      const workers = Array.from({ length: 8 }, (_, w) => worker(w));
      await eventually(async () => answered, (n) => n >= 24, 20_000);
      await server.kill('SIGKILL');
      server = undefined;
      await Promise.all(workers);

      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        const files = (await client.query('SELECT id::text AS id FROM files WHERE account_id = $1', [accountId])).rows.map((r) => r.id as string);
        const rows = (await client.query("SELECT action, subject FROM audit_events WHERE account_id = $1 AND action IN ('file.uploaded', 'file.deleted')", [accountId])).rows as Array<{ action: string; subject: string }>;
        const uploaded = rows.filter((r) => r.action === 'file.uploaded').map((r) => r.subject);
        const deleted = rows.filter((r) => r.action === 'file.deleted').map((r) => r.subject);
        expect(uploaded.length).to.be.at.least(24);
        expect(new Set(uploaded).size, 'one upload row per file').to.equal(uploaded.length);
        expect(new Set(deleted).size, 'one delete row per file').to.equal(deleted.length);
        // Every file has its upload row and no delete row; every upload row without its file has its delete row.
        expect(files.filter((id) => !uploaded.includes(id))).to.deep.equal([]);
        expect(files.filter((id) => deleted.includes(id))).to.deep.equal([]);
        expect(uploaded.filter((id) => !files.includes(id)).sort()).to.deep.equal([...deleted].sort());
      } finally {
        await client.end();
      }
    });
  });
}
