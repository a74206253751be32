// A ResumableUploads wired as the composition root wires it (src/server.ts):
// records, locker and intake over one ledger and one clock, for tests that drive the service
// directly with their own timers, store or removal steps.
import { systemClock, type Clock } from '../../src/clock.js';
import { ResumableRecords } from '../../src/tus/records.js';
import { ResumableUploads, type ResumableOptions } from '../../src/tus/uploads.js';
import { UploadLocker } from '../../src/tus/locker.js';
import type { PrismaClient } from '../../src/generated/prisma/client.js';
import { UploadLedger } from '../../src/ledger/ledger.js';
import { Intake } from '../../src/intake/intake.js';
import type { ObjectStore } from '../../src/storage/object-store.js';

export interface TusServiceOptions extends Partial<Omit<ResumableOptions, 'intake' | 'records' | 'locker'>> {
  /** The locker's: how long a lock holds unless renewed, how long a newcomer waits for the holder, and the clock. */
  leaseMs?: number;
  takeoverMs?: number;
  clock?: Clock;
}

export function tusService(prisma: PrismaClient, store: ObjectStore, options: TusServiceOptions = {}): ResumableUploads {
  const { leaseMs = 30_000, takeoverMs = 10_000, clock = systemClock, ...rest } = options;
  const ledger = new UploadLedger(prisma, { clock });
  const records = new ResumableRecords(prisma, ledger);
  const onCleanupError = rest.onCleanupError ?? (() => {});
  const locker = new UploadLocker(records, { leaseMs, takeoverMs, clock, onError: onCleanupError });
  const intake = new Intake({ prisma, store, ledger, onCleanupError, clock });
  return new ResumableUploads({ intake, records, locker, expirySeconds: 3600, ...rest, onCleanupError });
}
