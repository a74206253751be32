import { readdir } from 'node:fs/promises';
import type { PrismaClient } from '../generated/prisma/client.js';
import { migrationsDir } from './migrate.js';

/**
 * Migrations in prisma/migrations that the database has not finished. Asking
 * with one query lets a normal start skip the schema engine, whose
 * WebAssembly instance costs seconds and ~100 MiB of peak memory.
 */
export async function pendingMigrations(prisma: PrismaClient): Promise<string[]> {
  const entries = await readdir(migrationsDir, { withFileTypes: true });
  const all = entries.filter((e) => e.isDirectory()).map((e) => e.name);
  let applied: { migration_name: string }[];
  try {
    applied = await prisma.$queryRawUnsafe(
      'SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL',
    );
  } catch {
    // No migrations table yet: a new database.
    return all.sort();
  }
  const done = new Set(applied.map((row) => row.migration_name));
  return all.filter((name) => !done.has(name)).sort();
}
