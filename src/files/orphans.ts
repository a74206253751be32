// The sweep's last net (issue 51): a walk over the store's own objects that
// removes those no file row and no pending record names. Records are how
// everything else is found; this finds what escaped them, such as a write a
// hung store applied after our clean-up had deleted the key and its record
// was gone (STORE_LATE_WRITE_WINDOW bounds that, for a store that keeps
// to it).
//
// Safe with uploads in flight and many instances: an upload is recorded
// before its first byte and its record becomes its file row in one
// statement (commitFile), so an object that has neither in one snapshot
// (one statement) never will again (keys are never reused); objects written
// since GC_GRACE are not touched (a multipart upload's object is dated by
// its start on S3, and its record names it until it is a file); open uploads
// (multipart uploads, local `.tmp` files) are not objects; an S3 tus
// upload's tail is its upload's (`owner`) while that upload's record lives;
// keys the server never writes (another program's objects in the bucket)
// are never touched.
//
// Bounded work per sweep: GC_OBJECTS_PER_SWEEP keys, in pages of at most
// 1,000, from where the last sweep on any instance stopped. That position
// is a key (not a store's opaque token) kept in the database
// (sweep_positions): a restart continues the walk instead of starting over,
// and instances share one walk rather than each making its own. A sweep
// claims its page by moving the position with a compare-and-set, so two
// instances never walk the same page at once; at the end of the store the
// position goes back to the start.
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import { recordNamesSql } from '../ledger/statements.js';
import type { ObjectStore, StoredObject } from '../storage/object-store.js';
import { isStorageKey } from './record.js';

/** What the walk does with an orphan (GC_ORPHAN_OBJECTS). */
export type OrphanMode = 'remove' | 'report' | 'off';

export interface OrphanOptions {
  mode: OrphanMode;
  /** Objects listed per sweep at most (GC_OBJECTS_PER_SWEEP). */
  perSweep: number;
  /** Told of each sweep's orphans (the server logs them): removed, or, in `report` mode, left. */
  onFound?: (orphans: StoredObject[], mode: OrphanMode) => void;
}

export interface OrphanSweep {
  /** Objects listed. */
  listed: number;
  /** Orphans removed (mode remove) or found (mode report). */
  orphans: number;
  /** Removals that failed: the page is walked again next sweep. */
  failed: number;
}

/** What `dropstream gc --check` reports. */
export interface OrphanCheck {
  /** Objects listed: the whole store. */
  checked: number;
  /** Every orphan found. */
  total: number;
  /** The first CHECK_LIST of them, in key order. */
  orphans: StoredObject[];
}

/** The walk's row in sweep_positions. */
const WALK = 'objects';
/** Objects per listing call: what S3 answers at most. */
const PAGE = 1000;
/** Orphans a check lists by name; it counts them all. */
const CHECK_LIST = 1000;

export class OrphanObjects {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly store: ObjectStore,
    private readonly options: OrphanOptions,
  ) {}

  /** One sweep's share of the walk: up to perSweep objects from where the walk stands; orphans older than `cutoff` go (or are reported). */
  async sweep(cutoff: Date): Promise<OrphanSweep> {
    const result: OrphanSweep = { listed: 0, orphans: 0, failed: 0 };
    if (this.options.mode === 'off') return result;
    let after = await this.position();
    while (result.listed < this.options.perSweep) {
      const page = await this.store.listObjects({ after: after || undefined, limit: Math.min(PAGE, this.options.perSweep - result.listed) });
      const next = page.next ?? '';
      // Another instance moved the walk since we read it: this page is its.
      if (!(await this.advance(after, next))) break;
      result.listed += page.objects.length;
      const orphans = await this.orphansOf(page.objects, cutoff);
      if (orphans.length > 0) {
        const removed = this.options.mode === 'remove' ? await this.remove(orphans) : orphans;
        if (removed.length > 0) this.options.onFound?.(removed, this.options.mode);
        result.orphans += removed.length;
        if (removed.length < orphans.length) {
          // The store failed: walk this page again next time (unless another instance moved on).
          result.failed += 1;
          await this.advance(next, after);
          break;
        }
      }
      if (!page.next) break; // the end: the next sweep starts over
      after = next;
    }
    return result;
  }

  /** The whole store from its first key, as the sweep would judge it, removing nothing and leaving the walk where it is. */
  async check(cutoff: Date): Promise<OrphanCheck> {
    const result: OrphanCheck = { checked: 0, total: 0, orphans: [] };
    let after: string | undefined;
    do {
      const page = await this.store.listObjects({ after, limit: PAGE });
      result.checked += page.objects.length;
      const orphans = await this.orphansOf(page.objects, cutoff);
      result.total += orphans.length;
      result.orphans.push(...orphans.slice(0, CHECK_LIST - result.orphans.length));
      after = page.next;
    } while (after !== undefined);
    return result;
  }

  /**
   * The objects of `page` older than `cutoff` whose keys the server writes
   * and that nothing names: no pending record of their upload (`owner`),
   * and, for an object of its own key, no file row. One statement, so one
   * snapshot: an upload's commit (record to file row) is seen whole.
   */
  private async orphansOf(page: StoredObject[], cutoff: Date): Promise<StoredObject[]> {
    const candidates = page.filter((o) => o.modified <= cutoff && isStorageKey(o.owner));
    if (candidates.length === 0) return [];
    const values = Prisma.join(candidates.map((o) => Prisma.sql`(${o.key}, ${o.owner})`));
    const rows = await this.prisma.$queryRaw<{ key: string }[]>`
      SELECT o.key FROM (VALUES ${values}) AS o(key, owner_key)
      WHERE NOT ${recordNamesSql(Prisma.sql`o.owner_key`)}
        AND (o.key <> o.owner_key OR NOT EXISTS (SELECT 1 FROM files f WHERE f.storage_key = o.key))`;
    const unnamed = new Set(rows.map((r) => r.key));
    return candidates.filter((o) => unnamed.has(o.key));
  }

  /** Deletes `orphans` in order until the store fails; returns those deleted. */
  private async remove(orphans: StoredObject[]): Promise<StoredObject[]> {
    const removed: StoredObject[] = [];
    for (const orphan of orphans) {
      try {
        await this.store.delete(orphan.key);
      } catch {
        break;
      }
      removed.push(orphan);
    }
    return removed;
  }

  private async position(): Promise<string> {
    const row = await this.prisma.sweepPosition.findUnique({ where: { name: WALK } });
    return row?.position ?? '';
  }

  /** Moves the walk from `from` to `to` if it still stands at `from` (one statement); true when this moved it. */
  private async advance(from: string, to: string): Promise<boolean> {
    const rows = await this.prisma.$queryRaw<{ name: string }[]>`
      INSERT INTO sweep_positions (name, position, updated_at) VALUES (${WALK}, ${to}, ${new Date()}::timestamp(3))
      ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position, updated_at = EXCLUDED.updated_at
      WHERE sweep_positions.position = ${from}
      RETURNING name`;
    return rows.length === 1;
  }
}
