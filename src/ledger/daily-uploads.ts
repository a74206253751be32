// The plan's daily_uploads: uploads an account may start per UTC day, exact
// under concurrency and across instances. Part of the upload ledger
// (ledger.ts): only the ledger takes and gives back these daily slots.
import { AppError } from '../errors.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import { utcDay } from '../utc-day.js';
import { systemClock, type Clock } from '../clock.js';

/** 403 daily_upload_limit: the plan's uploads for this UTC day are used up. */
export const dailyUploadLimit = (limit: number) =>
  new AppError('daily_upload_limit', `The plan's limit of ${limit} uploads per day (UTC) is reached`);

/**
 * The daily slot is taken by one conditional upsert, which PostgreSQL
 * serialises on the row, before the body is read; it comes back with the
 * statement that drops or settles the pending record holding it (ledger.ts).
 */
export class DailyUploads {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Takes a slot for today (UTC) and returns the day, or undefined when `limit` are taken. */
  async take(accountId: number, limit: number): Promise<string | undefined> {
    if (limit <= 0) return undefined;
    const day = utcDay(this.clock());
    const rows = await this.prisma.$queryRaw<{ count: number }[]>`
      INSERT INTO daily_uploads (account_id, day, count) VALUES (${accountId}, ${day}::date, 1)
      ON CONFLICT (account_id, day) DO UPDATE SET count = daily_uploads.count + 1
      WHERE daily_uploads.count < ${limit}
      RETURNING count`;
    return rows.length ? day : undefined;
  }

  /** Gives a slot back to the day it was taken from, even after midnight. */
  async release(accountId: number, day: string): Promise<void> {
    await this.prisma.$executeRaw`
      UPDATE daily_uploads SET count = count - 1
      WHERE account_id = ${accountId} AND day = ${day}::date AND count > 0`;
  }
}
