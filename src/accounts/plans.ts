import type { PrismaClient } from '../generated/prisma/client.js';
import type { CallerChanges } from './caller-changes.js';
import { accountErrors } from './errors.js';
import type { Plan } from './types.js';

export type { Plan } from './types.js';

export type PlanChanges = Partial<Omit<Plan, 'name'>>;

const NEW_PLAN_DEFAULTS: Omit<Plan, 'name'> = {
  apiAccess: false,
  requestsPerMinute: 0,
  requestsPerDay: 0,
  maxFileSize: 0,
  dailyUploads: 0,
  concurrentUploads: null,
  maxTotalSize: null,
  maxExpiresIn: null,
};

export interface PlanRow {
  name: string;
  apiAccess: boolean;
  requestsPerMinute: number;
  requestsPerDay: number;
  maxFileSize: bigint;
  dailyUploads: number;
  concurrentUploads: number | null;
  maxTotalSize: bigint | null;
  maxExpiresIn: number | null;
}

export function toPlan(row: PlanRow): Plan {
  return {
    name: row.name,
    apiAccess: row.apiAccess,
    requestsPerMinute: row.requestsPerMinute,
    requestsPerDay: row.requestsPerDay,
    maxFileSize: Number(row.maxFileSize),
    dailyUploads: row.dailyUploads,
    concurrentUploads: row.concurrentUploads,
    maxTotalSize: row.maxTotalSize === null ? null : Number(row.maxTotalSize),
    maxExpiresIn: row.maxExpiresIn,
  };
}

export interface PlanLimits {
  /** The largest file the object store can hold (ObjectStore.maxObjectSize); no plan may allow more. */
  maxFileSize: number;
}

export class PlanService {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly limits: PlanLimits,
    /** Told after a plan changes, so cached callers on it are dropped everywhere. */
    private readonly callers?: CallerChanges,
  ) {}

  async list(): Promise<Plan[]> {
    const rows = await this.prisma.plan.findMany({ orderBy: { id: 'asc' } });
    return rows.map(toPlan);
  }

  /** Creates the plan, or changes only the given fields of an existing one. A new plan starts with everything off. */
  async set(name: string, changes: PlanChanges): Promise<Plan> {
    // Fields left out are not to be touched; undefined would also override the defaults below.
    const given = Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined)) as PlanChanges;
    if (given.maxFileSize !== undefined && given.maxFileSize > this.limits.maxFileSize) {
      throw accountErrors.fileSizeOverStore(this.limits.maxFileSize);
    }
    const created = { ...NEW_PLAN_DEFAULTS, ...given };
    const bigOrNull = (n: number | null | undefined) => (n === undefined ? undefined : n === null ? null : BigInt(n));
    const row = await this.prisma.plan.upsert({
      where: { name },
      update: { ...given, maxFileSize: given.maxFileSize === undefined ? undefined : BigInt(given.maxFileSize), maxTotalSize: bigOrNull(given.maxTotalSize) },
      create: { ...created, name, maxFileSize: BigInt(created.maxFileSize), maxTotalSize: bigOrNull(created.maxTotalSize) },
    });
    await this.callers?.planChanged(name);
    return toPlan(row);
  }

  /** Deletes a plan no account is on (the accounts' foreign key would refuse it anyway; this says why). */
  async remove(name: string): Promise<void> {
    await this.prisma.$transaction(async (tx) => {
      const plan = await tx.plan.findUnique({ where: { name }, select: { id: true } });
      if (!plan) throw accountErrors.planNotFound(name);
      const accounts = await tx.account.count({ where: { planId: plan.id } });
      if (accounts > 0) throw accountErrors.planInUse(name, accounts);
      await tx.plan.delete({ where: { id: plan.id } });
    });
    await this.callers?.planChanged(name);
  }
}
