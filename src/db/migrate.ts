// Applies prisma/migrations/*/migration.sql in order and records them in
// `_prisma_migrations`, exactly as `prisma migrate deploy` does, so either
// tool can take over a database the other has migrated.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SqlMigrationAwareDriverAdapterFactory } from '@prisma/driver-adapter-utils';
import type { SchemaEngine } from './schema-engine.js';

const root = fileURLToPath(new URL('../../prisma/', import.meta.url));
export const schemaPath = join(root, 'schema.prisma');
export const migrationsDir = join(root, 'migrations');

const noFilter = { externalTables: [], externalEnums: [] };

export async function loadMigrations() {
  const entries = await readdir(migrationsDir, { withFileTypes: true });
  const dirs = entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
  const lockPath = join(migrationsDir, 'migration_lock.toml');
  return {
    baseDir: migrationsDir,
    lockfile: { path: 'migration_lock.toml', content: await readFile(lockPath, 'utf8').catch(() => null) },
    shadowDbInitScript: '',
    migrationDirectories: await Promise.all(
      dirs.map(async (path) => ({
        path,
        migrationFile: {
          path: 'migration.sql',
          content: { tag: 'ok' as const, value: await readFile(join(migrationsDir, path, 'migration.sql'), 'utf8') },
        },
      })),
    ),
  };
}

type SqlAdapter = Awaited<ReturnType<SqlMigrationAwareDriverAdapterFactory['connect']>>;

/**
 * Runs `fn` with a schema engine, then disposes every adapter the engine
 * connected. The WebAssembly engine never disposes them itself: with
 * PostgreSQL each is a pool whose open connection keeps holding migrate's
 * advisory lock (the next migrate waits for it) and keeps the process alive
 * until the pool's idle timeout.
 */
async function withEngine<T>(adapterFactory: SqlMigrationAwareDriverAdapterFactory, fn: (engine: SchemaEngine) => Promise<T>): Promise<T> {
  const opened: SqlAdapter[] = [];
  const track = async (adapter: Promise<SqlAdapter>) => {
    const connected = await adapter;
    opened.push(connected);
    return connected;
  };
  const tracking: SqlMigrationAwareDriverAdapterFactory = Object.create(adapterFactory, {
    connect: { value: () => track(adapterFactory.connect()) },
    connectToShadowDb: { value: () => track(adapterFactory.connectToShadowDb()) },
  });
  for (const symbol of Object.getOwnPropertySymbols(adapterFactory)) {
    Object.defineProperty(tracking, symbol, { value: (adapterFactory as unknown as Record<symbol, unknown>)[symbol] });
  }
  const content = await readFile(schemaPath, 'utf8');
  // Imported here: a server whose database is up to date never loads the engine.
  const { openSchemaEngine, clearEngineTimers } = await import('./schema-engine.js');
  const engine = await openSchemaEngine({ path: 'schema.prisma', content }, tracking);
  try {
    return await fn(engine);
  } finally {
    engine.free();
    clearEngineTimers();
    // allSettled: a failed close must not hide the error that got us here.
    await Promise.allSettled(opened.map((adapter) => adapter.dispose()));
  }
}

/** Applies pending migrations; returns the names of those it applied. */
export async function applyMigrations(adapterFactory: SqlMigrationAwareDriverAdapterFactory): Promise<string[]> {
  return withEngine(adapterFactory, async (engine) => {
    const { appliedMigrationNames } = await engine.applyMigrations({
      migrationsList: await loadMigrations(),
      filters: noFilter,
    });
    return appliedMigrationNames;
  });
}

/** SQL that takes a database from the current migrations to the schema (for new migrations). */
export async function diffMigrationsToSchema(adapterFactory: SqlMigrationAwareDriverAdapterFactory): Promise<string> {
  return withEngine(adapterFactory, async (engine) => {
    const content = await readFile(schemaPath, 'utf8');
    const migrations = await loadMigrations();
    const result = await engine.diff({
      from: migrations.migrationDirectories.length ? { tag: 'migrations', ...migrations } : { tag: 'empty' },
      to: { tag: 'schemaDatamodel', files: [{ path: 'schema.prisma', content }] },
      script: true,
      exitCode: null,
      filters: noFilter,
    });
    return result.stdout ?? '';
  });
}
