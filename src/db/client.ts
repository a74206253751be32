// Builds the Prisma client for one of the two backends: PostgreSQL when a URL
// is given, otherwise PGlite (PostgreSQL compiled to WebAssembly) in a folder,
// or in memory for tests. Both run the same schema and migrations.
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PrismaPg } from '@prisma/adapter-pg';
import type { SqlMigrationAwareDriverAdapterFactory } from '@prisma/driver-adapter-utils';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import { PrismaClient } from '../generated/prisma/client.js';
import { lockDataDir } from './data-dir-lock.js';
import { applyMigrations } from './migrate.js';
import { pendingMigrations } from './pending.js';

export type { PrismaClient };

export interface DatabaseOptions {
  /** `postgresql://` URL. When absent, PGlite is used. */
  url?: string;
  /**
   * Folder for PGlite's files; absent means in memory (tests). Only one
   * process may open it: `<folder>.lock` is held while it is open, and a
   * second opener gets DataDirLockedError.
   */
  pgliteDir?: string;
}

export interface Database {
  prisma: PrismaClient;
  /** Which backend this is, for logs and readiness. */
  kind: 'postgresql' | 'pglite';
  /** Applies pending migrations; returns the names applied. */
  migrate(): Promise<string[]>;
  close(): Promise<void>;
}

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  let factory: SqlMigrationAwareDriverAdapterFactory;
  let closeDriver: () => Promise<void>;
  if (options.url) {
    factory = new PrismaPg({ connectionString: options.url });
    closeDriver = async () => {};
  } else {
    const lock = options.pgliteDir ? await lockFolder(options.pgliteDir) : undefined;
    let pglite: PGlite;
    try {
      pglite = await PGlite.create(options.pgliteDir);
    } catch (err) {
      await lock?.release();
      throw err;
    }
    factory = new PrismaPGlite(pglite);
    closeDriver = async () => {
      await pglite.close();
      await lock?.release();
    };
  }
  const prisma = new PrismaClient({ adapter: factory });
  return {
    prisma,
    kind: options.url ? 'postgresql' : 'pglite',
    migrate: async () => ((await pendingMigrations(prisma)).length ? applyMigrations(factory) : []),
    async close() {
      await prisma.$disconnect();
      await closeDriver();
    },
  };
}

async function lockFolder(dir: string) {
  await mkdir(dirname(dir), { recursive: true });
  const lock = await lockDataDir(dir);
  await mkdir(dir, { recursive: true });
  return lock;
}
