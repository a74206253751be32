import { defineConfig } from 'prisma/config';

// Used by the Prisma CLI (generate, and `migrate deploy` on machines that can
// download its engine). The server itself applies migrations with src/db/migrate.ts.
export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: { url: process.env.DATABASE_URL ?? 'postgresql://localhost/dropstream' },
});
