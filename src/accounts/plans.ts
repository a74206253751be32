import type { PrismaClient } from '../generated/prisma/client.js';
import type { CallerChanges } from './caller-changes.js';
import { accountErrors } from './errors.js';

export interface Plan {
  name: string;
  apiAccess: boolean;
  requestsPerMinute: number;
  requestsPerDay: number;
  /** Bytes. */
  maxFileSize: number;
  dailyUploads: number;
}

export type PlanChanges = Partial<Omit<Plan, 'name'>>;

const NEW_PLAN_DEFAULTS: Omit<Plan, 'name'> = {
  apiAccess: false,
  requestsPerMinute: 0,
  requestsPerDay: 0,
  maxFileSize: 0,
  dailyUploads: 0,
};

export function toPlan(row: { name: string; apiAccess: boolean; requestsPerMinute: number; requestsPerDay: number; maxFileSize: bigint; dailyUploads: number }): Plan {
  return {
    name: row.name,
    apiAccess: row.apiAccess,
    requestsPerMinute: row.requestsPerMinute,
    requestsPerDay: row.requestsPerDay,
    maxFileSize: Number(row.maxFileSize),
    dailyUploads: row.dailyUploads,
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
    const row = await this.prisma.plan.upsert({
      where: { name },
      update: { ...given, maxFileSize: given.maxFileSize === undefined ? undefined : BigInt(given.maxFileSize) },
      create: { ...created, name, maxFileSize: BigInt(created.maxFileSize) },
    });
    await this.callers?.planChanged(name);
    return toPlan(row);
  }
}
