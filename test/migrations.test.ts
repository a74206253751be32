import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'chai';
import pg from 'pg';
import { openDatabase, type Database } from '../src/db/client.js';
import { migrationsDir } from '../src/db/migrate.js';
import { backends, createTestDatabase } from './helpers/databases.js';

interface MigrationRow {
  migration_name: string;
  checksum: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
  applied_steps_count: number;
}

async function migrationFolders(): Promise<string[]> {
  const entries = await readdir(migrationsDir, { withFileTypes: true });
  return entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

for (const backend of backends) {
  describe(`migrations (${backend})`, () => {
    let db: Database;
    let closed = false;
    let url: string | undefined;
    let drop: (() => Promise<void>) | undefined;
    let folders: string[];
    let firstRun: string[];

    before(async () => {
      folders = await migrationFolders();
      if (backend === 'postgresql') {
        const database = await createTestDatabase();
        ({ url, drop } = database);
        db = await openDatabase({ url });
      } else {
        db = await openDatabase({});
      }
      firstRun = await db.migrate();
    });

    after(async () => {
      if (!closed) await db?.close();
      await drop?.();
    });

    it('when migrate runs on an empty database, then it applies every migration folder in order', () => {
      expect(folders).to.include.members(['20261121231846_init', '20261121231900_seed_plans']);
      expect(firstRun).to.deep.equal(folders);
    });

    it('when migrate runs again, then it applies nothing', async () => {
      expect(await db.migrate()).to.deep.equal([]);
    });

    it('when migrations are applied, then _prisma_migrations records each with the checksum prisma migrate deploy expects', async () => {
      const rows = await db.prisma.$queryRawUnsafe<MigrationRow[]>(
        'SELECT migration_name, checksum, finished_at, rolled_back_at, applied_steps_count FROM _prisma_migrations ORDER BY migration_name',
      );
      expect(rows.map((r) => r.migration_name)).to.deep.equal(folders);
      for (const row of rows) {
        const sql = await readFile(join(migrationsDir, row.migration_name, 'migration.sql'), 'utf8');
        expect(row.checksum, row.migration_name).to.equal(sha256(sql));
        expect(row.finished_at, row.migration_name).to.be.instanceOf(Date);
        expect(row.rolled_back_at, row.migration_name).to.equal(null);
        expect(Number(row.applied_steps_count), row.migration_name).to.equal(1);
      }
    });

    it('when migrations are applied, then exactly the free, pro and business plans are seeded', async () => {
      const plans = await db.prisma.plan.findMany({ orderBy: { id: 'asc' } });
      const shown = plans.map((p) => ({
        name: p.name,
        apiAccess: p.apiAccess,
        requestsPerMinute: p.requestsPerMinute,
        requestsPerDay: p.requestsPerDay,
        maxFileSize: p.maxFileSize,
        dailyUploads: p.dailyUploads,
      }));
      expect(shown).to.deep.equal([
        { name: 'free', apiAccess: false, requestsPerMinute: 0, requestsPerDay: 0, maxFileSize: 0n, dailyUploads: 0 },
        { name: 'pro', apiAccess: true, requestsPerMinute: 50, requestsPerDay: 5000, maxFileSize: 5368709120n, dailyUploads: 500 },
        { name: 'business', apiAccess: true, requestsPerMinute: 100, requestsPerDay: 10000, maxFileSize: 10737418240n, dailyUploads: 1000 },
      ]);
    });

    if (backend === 'postgresql') {
      it('when migrate has returned, then it no longer holds the migration advisory lock', async () => {
        await db.migrate();
        const [row] = await db.prisma.$queryRawUnsafe<Array<{ n: number }>>(
          "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        );
        expect(row?.n).to.equal(0);
      });

      it('when the database is closed, then no connection to it remains', async () => {
        await db.migrate();
        await db.close();
        closed = true;
        const name = new URL(url!).pathname.slice(1);
        const admin = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
        await admin.connect();
        try {
          // A closed socket leaves pg_stat_activity a moment later; a leaked pool stays for its 10 s idle timeout.
          let open = -1;
          for (let deadline = Date.now() + 3000; open !== 0 && Date.now() < deadline; ) {
            if (open > 0) await new Promise((r) => setTimeout(r, 50));
            const res = await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [name]);
            open = res.rows[0]!.n;
          }
          expect(open).to.equal(0);
        } finally {
          await admin.end();
        }
      });
    }
  });
}

describe('the schema engine after migrate', function () {
  this.timeout(60_000);

  it('when migrate has returned on a new database, then the engine left no timer behind (it kept a finished `dropstream migrate` or first start alive up to 10 s)', async () => {
    const db = await openDatabase({});
    try {
      const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
      const before = timers();
      expect(await db.migrate()).to.have.length((await migrationFolders()).length);
      expect(timers() - before, 'timers added by migrate').to.equal(0);
    } finally {
      await db.close();
    }
  });
});
