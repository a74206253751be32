// Reading the audit trail: the account's rows, newest first, paged, by
// action and time. Rows are written by the statements that write the facts
// (actor.ts: auditSql, auditRow), never here.
import type { PrismaClient } from '../generated/prisma/client.js';

export interface AuditEntry {
  action: string;
  subject: string | null;
  actor: string;
  keyPublicId: string | null;
  keyName: string | null;
  requestId: string | null;
  clientAddress: string | null;
  createdAt: Date;
}

export interface AuditFilter {
  action?: string;
  /** From this time on (inclusive). */
  since?: Date;
  /** Before this time. */
  until?: Date;
}

export class AuditTrail {
  constructor(private readonly prisma: PrismaClient) {}

  async list(accountId: number, filter: AuditFilter, page: number, limit: number): Promise<{ entries: AuditEntry[]; total: number }> {
    const where = {
      accountId,
      ...(filter.action ? { action: filter.action } : {}),
      ...(filter.since || filter.until ? { createdAt: { ...(filter.since ? { gte: filter.since } : {}), ...(filter.until ? { lt: filter.until } : {}) } } : {}),
    };
    const [total, entries] = await Promise.all([
      this.prisma.auditEvent.count({ where }),
      this.prisma.auditEvent.findMany({
        where,
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
        skip: (page - 1) * limit,
        take: limit,
        select: { action: true, subject: true, actor: true, keyPublicId: true, keyName: true, requestId: true, clientAddress: true, createdAt: true },
      }),
    ]);
    return { entries, total };
  }
}
