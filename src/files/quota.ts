import type { PrismaClient } from '../generated/prisma/client.js';

/** A taken upload slot; give it back if the upload does not complete. */
export interface UploadSlot {
  release(): Promise<void>;
}

/** The UTC day, as the database's DATE. */
const utcDay = (now: Date) => now.toISOString().slice(0, 10);

/**
 * Daily upload quotas, exact under concurrency and across instances: the
 * slot is taken by one conditional upsert, which PostgreSQL serialises on the
 * row, before the body is read.
 */
export class UploadQuota {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  /** Takes a slot for today (UTC), or returns undefined when `limit` are taken. */
  async take(accountId: number, limit: number): Promise<UploadSlot | undefined> {
    if (limit <= 0) return undefined;
    const day = utcDay(this.clock());
    const rows = await this.prisma.$queryRaw<{ count: number }[]>`
      INSERT INTO daily_uploads (account_id, day, count) VALUES (${accountId}, ${day}::date, 1)
      ON CONFLICT (account_id, day) DO UPDATE SET count = daily_uploads.count + 1
      WHERE daily_uploads.count < ${limit}
      RETURNING count`;
    if (rows.length === 0) return undefined;
    return {
      // The slot is returned to the day it was taken from, even after midnight.
      release: async () => {
        await this.prisma.$executeRaw`
          UPDATE daily_uploads SET count = count - 1
          WHERE account_id = ${accountId} AND day = ${day}::date AND count > 0`;
      },
    };
  }
}
