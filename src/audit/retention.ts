import type { PrismaClient } from '../generated/prisma/client.js';

/** Rows one statement removes at most: each statement stays short, whatever the backlog. */
const PRUNE_BATCH = 5000;
/** Statements per sweep at most: a large backlog goes over several sweeps. */
const PRUNE_ROUNDS = 20;

/**
 * Removes audit rows older than `before` (AUDIT_RETENTION_DAYS, from the
 * sweep), oldest first, in batches; returns how many went. The only
 * statement that ever removes audit rows, bar an account's deletion.
 */
export async function pruneAudit(prisma: PrismaClient, before: Date): Promise<number> {
  let pruned = 0;
  for (let round = 0; round < PRUNE_ROUNDS; round++) {
    const removed = await prisma.$executeRaw`
      DELETE FROM audit_events WHERE id IN (
        SELECT id FROM audit_events WHERE created_at < ${before}::timestamp(3) ORDER BY created_at LIMIT ${PRUNE_BATCH}
      )`;
    pruned += removed;
    if (removed < PRUNE_BATCH) break;
  }
  return pruned;
}
