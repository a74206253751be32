// Writes prisma/migrations/<timestamp>_<name>/migration.sql with the SQL that
// takes the current migrations to prisma/schema.prisma. Replaces
// `prisma migrate dev --create-only`, whose native engine cannot be fetched
// offline. Diffing from migrations needs a shadow database: an in-memory PGlite.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import { diffMigrationsToSchema, migrationsDir } from '../src/db/migrate.js';

const name = process.argv[2];
if (!name || !/^[a-z0-9_]+$/.test(name)) {
  console.error('usage: npm run migration:new -- <snake_case_name>');
  process.exit(2);
}
const shadow = new PGlite();
const sql = await diffMigrationsToSchema(new PrismaPGlite(shadow));
await shadow.close();
if (!sql.trim() || /^-- This is an empty migration/.test(sql.trim())) {
  console.error('schema.prisma matches the migrations: nothing to write');
  process.exit(1);
}
const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
const dir = join(migrationsDir, `${stamp}_${name}`);
await mkdir(dir, { recursive: true });
await writeFile(join(dir, 'migration.sql'), sql);
console.log(join(dir, 'migration.sql'));
