import type { PrismaClient } from '../generated/prisma/client.js';
import { utcDay } from '../utc-day.js';
import { fileErrors } from './errors.js';

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

  /**
   * Takes a slot for today (403 daily_upload_limit when `limit` are taken)
   * and starts an upload with it: `start` records it (PendingObjects), after
   * which the record holds the slot. Until then the slot is ours alone, so if
   * `start` fails it is given back here (a failure to give it back goes to
   * `onCleanupError`) and the error goes on.
   */
  async startWithSlot<T>(accountId: number, limit: number, start: (day: string) => Promise<T>, onCleanupError: (err: unknown) => void): Promise<T> {
    const day = await this.take(accountId, limit);
    if (!day) throw fileErrors.dailyUploadLimit(limit);
    try {
      return await start(day);
    } catch (err) {
      await this.release(accountId, day).catch(onCleanupError);
      throw err;
    }
  }

  /** Gives a slot back to the day it was taken from, even after midnight. */
  async release(accountId: number, day: string): Promise<void> {
    await this.prisma.$executeRaw`
      UPDATE daily_uploads SET count = count - 1
      WHERE account_id = ${accountId} AND day = ${day}::date AND count > 0`;
  }
}
