// Rolling upgrades need expand-then-contract migrations (docs/development.md,
// Migrations): the migrations added since the last release must leave every
// table and column the release uses as it was, for the release's instances
// still serving while the new ones migrate. The rule itself is
// test/helpers/migration-lint.ts; the running proof is test/upgrade/.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { migrationsDir } from '../../src/db/migrate.js';
import { lintMigrations, type MigrationFile } from '../helpers/migration-lint.js';
import { notRun } from '../helpers/not-run.js';
import { migrationsAt, previousRelease, type Release } from '../helpers/releases.js';

const here = (): MigrationFile[] =>
  readdirSync(migrationsDir, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort()
    .map((name) => ({ name, sql: readFileSync(join(migrationsDir, name, 'migration.sql'), 'utf8') }));

const RELEASED: MigrationFile[] = [
  {
    name: '1_init',
    sql: `CREATE TABLE "files" ("id" SERIAL NOT NULL, "name" TEXT NOT NULL, "token" TEXT NOT NULL, "note" TEXT, CONSTRAINT "files_pkey" PRIMARY KEY ("id"));
          CREATE UNIQUE INDEX "files_token_key" ON "files"("token");
          CREATE INDEX "files_name_idx" ON "files"("name");`,
  },
];
const lint = (sql: string, lastVersion = '0.2.0') => lintMigrations(RELEASED, [{ name: '2_next', sql }], lastVersion);
const kinds = (sql: string) => lint(sql).map((f) => f.kind);

describe('migrations since the last release: expand only (the rule)', () => {
  it('when a migration drops, renames or retypes a table or column the release has, then it is a contract step and flagged', () => {
    expect(kinds('DROP TABLE "files";')).to.deep.equal(['contract']);
    expect(kinds('ALTER TABLE "files" DROP COLUMN "note";')).to.deep.equal(['contract']);
    expect(kinds('ALTER TABLE "files" RENAME COLUMN "name" TO "filename";')).to.deep.equal(['contract']);
    expect(kinds('ALTER TABLE "files" RENAME TO "objects";')).to.deep.equal(['contract']);
    expect(kinds('ALTER TABLE "files" ALTER COLUMN "name" SET DATA TYPE VARCHAR(100);')).to.deep.equal(['contract']);
    expect(kinds('ALTER TABLE "files" ALTER COLUMN "name" TYPE VARCHAR(100);')).to.deep.equal(['contract']);
    expect(kinds('ALTER TABLE "files" DROP CONSTRAINT "files_pkey";')).to.deep.equal(['contract']);
    expect(kinds('DROP INDEX "files_token_key";')).to.deep.equal(['contract']);
    expect(kinds('DROP SEQUENCE "files_id_seq";')).to.deep.equal(['contract']);
    expect(kinds('TRUNCATE "files";')).to.deep.equal(['contract']);
  });

  it("when a migration makes the release's writes fail (NOT NULL, no default, a new constraint or unique index), then it is flagged", () => {
    expect(kinds('ALTER TABLE "files" ALTER COLUMN "note" SET NOT NULL;')).to.deep.equal(['compat']);
    expect(kinds('ALTER TABLE "files" ALTER COLUMN "id" DROP DEFAULT;')).to.deep.equal(['compat']);
    expect(kinds('ALTER TABLE "files" ADD COLUMN "size" BIGINT NOT NULL;')).to.deep.equal(['compat']);
    expect(kinds('ALTER TABLE "files" ADD CONSTRAINT "files_name_check" CHECK (length("name") < 100);')).to.deep.equal(['compat']);
    expect(kinds('CREATE UNIQUE INDEX "files_name_key" ON "files"("name");')).to.deep.equal(['compat']);
    expect(kinds('ALTER TYPE "state" ADD VALUE \'held\';')).to.deep.equal(['compat']);
  });

  it('when a migration only adds (tables, nullable or defaulted columns, indexes, constraints over new columns), or changes what the release does not know, then nothing is flagged', () => {
    const expand = `
      -- CreateTable
      CREATE TABLE "links" ("id" TEXT NOT NULL, "file_id" INTEGER NOT NULL, CONSTRAINT "links_pkey" PRIMARY KEY ("id"));
      CREATE UNIQUE INDEX "links_file_id_key" ON "links"("file_id");
      ALTER TABLE "links" ADD CONSTRAINT "links_file_id_fkey" FOREIGN KEY ("file_id") REFERENCES "files"("id") ON DELETE CASCADE;
      ALTER TABLE "files" ADD COLUMN "size" BIGINT NOT NULL DEFAULT 0, ADD COLUMN "link_id" TEXT;
      ALTER TABLE "files" ADD CONSTRAINT "files_link_id_fkey" FOREIGN KEY ("link_id") REFERENCES "links"("id") ON DELETE SET NULL;
      ALTER TABLE "files" ALTER COLUMN "note" SET DEFAULT 'none';
      CREATE INDEX "files_size_idx" ON "files"("size");
      DROP INDEX "files_name_idx";
      UPDATE "files" SET "note" = 'DROP TABLE files; ALTER TABLE files DROP COLUMN name' WHERE "note" IS NULL;
      ALTER TABLE "links" DROP COLUMN "file_id";
      DROP TABLE "links";`;
    expect(lint(expand)).to.deep.equal([]);
  });

  it('when a flagged statement carries "-- contract: ... since X.Y.Z" of the last release or older, or "-- upgrade-safe:", then it passes; a version after the last release does not', () => {
    expect(lint('-- contract: files.note unused since 0.2.0\nALTER TABLE "files" DROP COLUMN "note";')).to.deep.equal([]);
    expect(lint('-- contract: files.note unused since 0.1.3\nALTER TABLE "files" DROP COLUMN "note";')).to.deep.equal([]);
    const early = lint('-- contract: files.note unused since 0.3.0\nALTER TABLE "files" DROP COLUMN "note";');
    expect(early.map((f) => f.kind)).to.deep.equal(['contract']);
    expect(early[0]!.why).to.include('names a version after the last release, 0.2.0');
    expect(lint('-- upgrade-safe: the release never writes note\nALTER TABLE "files" ALTER COLUMN "note" SET NOT NULL;')).to.deep.equal([]);
    expect(kinds('-- upgrade-safe: not enough for a removal\nALTER TABLE "files" DROP COLUMN "note";'), 'upgrade-safe does not pass a contract step').to.deep.equal(['contract']);
  });

  it("when this project's own random_file_ids migration is read as if 20261125062000_pending_claims had been a release, then its DROP DEFAULT of files.id and DROP SEQUENCE are flagged (instances before it inserted files without an id)", () => {
    const all = here();
    const cut = all.findIndex((m) => m.name === '20261125085336_random_file_ids');
    expect(cut).to.be.greaterThan(0);
    const findings = lintMigrations(all.slice(0, cut), [all[cut]!], '0.0.1');
    expect(findings.map((f) => [f.kind, f.statement])).to.deep.equal([
      ['compat', 'ALTER TABLE "files" ALTER COLUMN "id" DROP DEFAULT'],
      ['contract', 'DROP SEQUENCE "files_id_seq"'],
    ]);
  });
});

// The release's commit comes from git (its tag, or CHANGELOG.md's heading);
// a shallow clone may not hold it, which CI's full clone always does.
let release: Release | undefined;
let missing: string | undefined;
try {
  release = previousRelease();
} catch (err) {
  missing = (err as Error).message;
  if (process.env.CI) throw err;
  notRun(`the last release's commit is not in this clone (${missing}): "migrations since the last release"`, 'a full clone: git fetch --unshallow');
}

if (release) {
  const { version, commit } = release;
  describe(`migrations since the last release (${version}, commit ${commit.slice(0, 12)}): expand only`, () => {
    const released = migrationsAt(commit);
    const current = here();
    const names = new Set(released.map((m) => m.name));

    it("when the release's migrations are compared with this commit's, then every one is still here, unchanged (databases have run them)", () => {
      expect(released.length).to.be.greaterThan(0);
      const byName = new Map(current.map((m) => [m.name, m.sql]));
      for (const m of released) {
        expect(byName.has(m.name), `${m.name} was removed`).to.equal(true);
        expect(byName.get(m.name)!.trim(), `${m.name} was edited`).to.equal(m.sql.trim());
      }
    });

    it('when the migrations added since are read, then none drops, renames or retypes what the release uses, or makes its writes fail', () => {
      const added = current.filter((m) => !names.has(m.name));
      const findings = lintMigrations(released, added, version);
      const report = findings.map((f) => `${f.migration}: ${f.kind}: ${f.why}\n    ${f.statement}`).join('\n');
      expect(findings, `${findings.length} statement(s) would break ${version}'s instances during a rolling upgrade (docs/development.md, Migrations):\n${report}\n`).to.deep.equal([]);
    });
  });
}
