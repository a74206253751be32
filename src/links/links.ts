// The one owner of the links table: a file's public links, each with its
// own token, rules (expiry, download budget, password) and counts. A file
// has exactly one primary link: the one whose token files.link_token holds
// (so listings read one table); every statement here that changes which link
// is primary changes that column in the same statement.
//
// Every read and write is one statement: a download resolves its token in
// one SELECT (link and file joined), as it did when the token was a column
// of the file; a limited link's bytes are reserved in one conditional
// UPDATE, which PostgreSQL serialises on the row, so budgets hold across
// concurrent requests and instances.
import { auditSql, SYSTEM, type Actor } from '../audit/actor.js';
import { randomBytes, randomUUID } from 'node:crypto';
import { DEFAULT_DOWNLOAD_EVENT_LIMITS, fileDownloadedSql, linkExhaustedSql, type DownloadEventLimits } from '../webhooks/events.js';
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import { systemClock, type Clock } from '../clock.js';

/**
 * The file a link leads to, as a download needs it. Links read it in the
 * statement that resolves the token, so links/ needs nothing of files/
 * (which imports this folder to write a new file's primary link).
 */
export interface LinkedFile {
  id: number;
  accountId: number;
  filename: string;
  /** Bytes. */
  size: number;
  /** Hex SHA-256 of the content (the download's ETag); null for an upload straight to the store that declared none. */
  sha256: string | null;
  storageKey: string;
  /** The token of the file's primary link. */
  linkToken: string;
  /** When the file expires (every link then answers 410); null: never. */
  expiresAt: Date | null;
}

/** Opaque, URL-safe public link token: 128 random bits. */
export const newLinkToken = () => randomBytes(16).toString('base64url');

/** A link's API id: a UUID, telling nothing about its token. */
export const newLinkId = () => randomUUID();

/** The rules a new link is made with; all optional. */
export interface LinkRules {
  /** After this, the link answers 410 link_expired. */
  expiresAt?: Date;
  /** Complete downloads allowed, counted in bytes (see budgetOf). */
  maxDownloads?: number;
  /** From hashPassword (link-password.ts), never the password. */
  passwordHash?: string;
}

/** A link as its owner sees it. */
export interface LinkRecord {
  id: string;
  fileId: number;
  token: string;
  primary: boolean;
  /** When the link stops working: its own expiry or its file's, whichever is first. */
  expiresAt?: Date;
  maxDownloads?: number;
  passwordProtected: boolean;
  /** Complete downloads through this link. */
  downloadCount: number;
  createdAt: Date;
}

/** A link found by its token, with what a download needs to check it, and its file. */
export interface ResolvedLink {
  link: LinkRecord & { passwordHash?: string; bytesServed: number };
  file: LinkedFile;
}

/** What revoking a link did: removed it, or removed the primary link and made `primary` in its place. */
export type Revocation = { outcome: 'revoked' } | { outcome: 'rotated'; primary: LinkRecord };

/** What reserving bytes of a link's budget came to. */
export type Reservation = 'reserved' | 'exhausted' | 'gone';

/**
 * The bytes a link with `maxDownloads` may serve: that many times the file.
 * An empty file counts as one byte per download, so its budget still ends.
 */
export const budgetOf = (maxDownloads: number, size: number) => maxDownloads * Math.max(size, 1);

/**
 * How far a whole download may take a link past its budget: an eighth of
 * the file, at most 8 MiB. Clients that stopped early (a preview, a
 * download manager's probe, a client that hung up) are charged what they
 * took, and with a budget of exactly N x size any such prefix would turn
 * the recipient's whole download away with 410 (issue 38). Less than the
 * file, so never one complete download more than max_downloads; ranges get
 * no slack, so a used-up link serves no byte more.
 */
export const slackOf = (size: number) => Math.min(Math.floor(Math.max(size, 1) / 8), 8 * 1024 * 1024);

/** What a response of `length` bytes takes from a budget (an empty file's download: one). */
export const chargeOf = (length: number) => Math.max(length, 1);

/**
 * Inserts the primary link of the rows of `inserted` (a CTE with the new
 * file's id and link_token): a CTE for commitFile's single statement, so a
 * file never exists without its primary link.
 */
export function primaryLinkSql(inserted: 'inserted', rules: LinkRules, now: Date): Prisma.Sql {
  return Prisma.sql`
  INSERT INTO links (id, file_id, token, expires_at, max_downloads, password_hash, created_at)
  SELECT ${newLinkId()}, id, link_token, ${rules.expiresAt ?? null}::timestamp(3), ${rules.maxDownloads ?? null}::integer,
    ${rules.passwordHash ?? null}::text, ${now}::timestamp(3)
  FROM ${Prisma.raw(inserted)}`;
}

interface LinkRow {
  id: string;
  file_id: number;
  token: string;
  primary: boolean;
  expires_at: Date | null;
  max_downloads: number | null;
  password_hash: string | null;
  download_count: bigint;
  bytes_served: bigint;
  created_at: Date;
}

const toLink = (row: LinkRow): LinkRecord => ({
  id: row.id,
  fileId: row.file_id,
  token: row.token,
  primary: row.primary,
  expiresAt: row.expires_at ?? undefined,
  maxDownloads: row.max_downloads ?? undefined,
  passwordProtected: row.password_hash !== null,
  downloadCount: Number(row.download_count),
  createdAt: row.created_at,
});

// A link's expires_at as read is when it stops working: its own time or its
// file's, whichever comes first (least() skips nulls).
const LINK_COLUMNS = Prisma.sql`l.id, l.file_id, l.token, l.token = f.link_token AS "primary", least(l.expires_at, f.expires_at) AS expires_at,
  l.max_downloads, l.password_hash, l.download_count, l.bytes_served, l.created_at`;

export class FileLinks {
  constructor(
    private readonly prisma: PrismaClient,
    /** WEBHOOK_PENDING_DOWNLOADS: the bound on a webhook's undelivered file.downloaded messages (src/webhooks/events.ts). */
    private readonly downloadEvents: DownloadEventLimits = DEFAULT_DOWNLOAD_EVENT_LIMITS,
    /** The time a download is counted at (its events' and audit row's). */
    private readonly clock: Clock = systemClock,
  ) {}

  /** The link of `token` and its file, in one statement; undefined for no such link. */
  async resolve(token: string): Promise<ResolvedLink | undefined> {
    const rows = await this.prisma.$queryRaw<(LinkRow & ResolvedFileColumns)[]>`
      SELECT ${LINK_COLUMNS}, f.account_id, f.filename, f.size, f.sha256, f.storage_key, f.link_token, f.expires_at AS file_expires_at
      FROM links l JOIN files f ON f.id = l.file_id
      WHERE l.token = ${token}`;
    const row = rows[0];
    if (!row) return undefined;
    return { link: { ...toLink(row), passwordHash: row.password_hash ?? undefined, bytesServed: Number(row.bytes_served) }, file: fileOf(row) };
  }

  /** The links of the account's file, the primary first; undefined when the account has no such file. */
  async list(accountId: number, fileId: number): Promise<LinkRecord[] | undefined> {
    // A LEFT JOIN from the file, so "no file" (no row) and "no links" (one row of nulls) differ, in one statement.
    const rows = await this.prisma.$queryRaw<(Omit<LinkRow, 'id'> & { id: string | null })[]>`
      SELECT ${LINK_COLUMNS}
      FROM files f LEFT JOIN links l ON l.file_id = f.id
      WHERE f.id = ${fileId} AND f.account_id = ${accountId}
      ORDER BY "primary" DESC, l.created_at, l.id`;
    if (rows.length === 0) return undefined;
    return rows.filter((row): row is LinkRow => row.id !== null).map(toLink);
  }

  /** A new link to the account's file; undefined when the account has no such file. */
  async create(accountId: number, fileId: number, rules: LinkRules, now = new Date(), actor: Actor = SYSTEM): Promise<LinkRecord | undefined> {
    const rows = await this.prisma.$queryRaw<LinkRow[]>`
      WITH l AS (
        INSERT INTO links (id, file_id, token, expires_at, max_downloads, password_hash, created_at)
        SELECT ${newLinkId()}, id, ${newLinkToken()}, ${rules.expiresAt ?? null}::timestamp(3), ${rules.maxDownloads ?? null}::integer,
          ${rules.passwordHash ?? null}::text, ${now}::timestamp(3)
        FROM files WHERE id = ${fileId} AND account_id = ${accountId}
        RETURNING *
      ), audited AS (${auditSql('link.created', 'l JOIN files lf ON lf.id = l.file_id', 'lf.account_id', 'l.id', actor, now)})
      SELECT ${LINK_COLUMNS} FROM l JOIN files f ON f.id = l.file_id`;
    return rows[0] ? toLink(rows[0]) : undefined;
  }

  /**
   * Removes the link from the account's file, in one statement. Removing the
   * primary link rotates it: the file gets a fresh primary link, with new
   * token and counts but the same rules (a password or a download limit the
   * owner set stays on the file's public link), and files.link_token names
   * it. Returns what was removed (with the fresh primary link, whose URL the
   * owner needs next), or undefined when there is no such link.
   */
  async revoke(accountId: number, fileId: number, linkId: string, now = new Date(), actor: Actor = SYSTEM): Promise<Revocation | undefined> {
    // The fresh link is read from the CTE's RETURNING: the statement's
    // snapshot does not see its own insert in the table.
    const rows = await this.prisma.$queryRaw<({ was_primary: boolean } & Partial<LinkRow>)[]>`
      WITH removed AS (
        DELETE FROM links l USING files f
        WHERE l.id = ${linkId} AND l.file_id = f.id AND f.id = ${fileId} AND f.account_id = ${accountId}
        RETURNING l.id, f.account_id, l.file_id, l.token = f.link_token AS was_primary, l.expires_at, l.max_downloads, l.password_hash, f.expires_at AS file_expires_at
      ), fresh AS (
        INSERT INTO links (id, file_id, token, expires_at, max_downloads, password_hash, created_at)
        SELECT ${newLinkId()}, file_id, ${newLinkToken()}, expires_at, max_downloads, password_hash, ${now}::timestamp(3)
        FROM removed WHERE was_primary
        RETURNING *
      ), pointed AS (
        UPDATE files SET link_token = fresh.token FROM fresh WHERE files.id = fresh.file_id
      ), audited AS (${auditSql('link.revoked', 'removed', 'account_id', 'id', actor, now)}),
      audited_fresh AS (${auditSql('link.created', 'fresh, removed', 'removed.account_id', 'fresh.id', actor, now)})
      SELECT r.was_primary, n.id, n.file_id, n.token, true AS "primary", least(n.expires_at, r.file_expires_at) AS expires_at,
        n.max_downloads, n.password_hash, n.download_count, n.bytes_served, n.created_at
      FROM removed r LEFT JOIN fresh n ON n.file_id = r.file_id`;
    const row = rows[0];
    if (!row) return undefined;
    return row.was_primary ? { outcome: 'rotated', primary: toLink(row as LinkRow) } : { outcome: 'revoked' };
  }

  /**
   * Takes `charge` bytes of the link's budget (`budget`: budgetOf), all or
   * nothing, in one conditional UPDATE: concurrent requests on any instance
   * are serialised on the row, and the budget is never overdrawn. 'gone'
   * when the link was removed since it was resolved.
   */
  async reserve(linkId: string, charge: number, budget: number): Promise<Reservation> {
    const rows = await this.prisma.$queryRaw<{ found: boolean; reserved: boolean }[]>`
      WITH link AS (SELECT id FROM links WHERE id = ${linkId}), taken AS (
        UPDATE links SET bytes_served = bytes_served + ${BigInt(charge)}
        WHERE id = ${linkId} AND bytes_served + ${BigInt(charge)} <= ${BigInt(budget)}
        RETURNING id
      )
      SELECT EXISTS (SELECT 1 FROM link) AS found, EXISTS (SELECT 1 FROM taken) AS reserved`;
    const row = rows[0];
    if (!row?.found) return 'gone';
    return row.reserved ? 'reserved' : 'exhausted';
  }

  /** Gives back `bytes` of a reservation that never left this process (a response cut short). */
  async release(linkId: string, bytes: number): Promise<void> {
    if (bytes <= 0) return;
    await this.prisma.$executeRaw`
      UPDATE links SET bytes_served = greatest(bytes_served - ${BigInt(bytes)}, 0) WHERE id = ${linkId}`;
  }

  /**
   * One more complete download, on the link and on its file (the spec's
   * download_count), with its webhook messages (file.downloaded, and
   * link.exhausted when the link just reached max_downloads), in one statement.
   * The file's row is locked first, then the link's, the order a deletion
   * takes them in (the file, then its links by cascade): the other order
   * deadlocked against a DELETE sent the moment the download ended
   * (PostgreSQL 40P01, the DELETE answered 500). A file deleted first is
   * counted nowhere. A webhook at its bound of undelivered file.downloaded
   * messages gets none for this download (events.ts); those are counted.
   */
  async countDownload(linkId: string, fileId: number, audit?: { address: string | null }): Promise<void> {
    const now = this.clock();
    // AUDIT_DOWNLOADS: the account's audit row, in the statement that counts the download (absent: nothing more).
    const audited = audit ? Prisma.sql`, audited AS (${auditSql('file.downloaded', 'counted', 'account_id', 'id', { ...SYSTEM, kind: 'link', address: audit.address }, now)})` : Prisma.empty;
    const rows = await this.prisma.$queryRaw<{ dropped: number }[]>`
      WITH file AS (SELECT id FROM files WHERE id = ${fileId} FOR UPDATE),
      link AS (UPDATE links SET download_count = download_count + 1 WHERE id = ${linkId} AND EXISTS (SELECT 1 FROM file) RETURNING *),
      counted AS (UPDATE files SET download_count = download_count + 1 WHERE id = ${fileId} AND EXISTS (SELECT 1 FROM link) RETURNING *),
      ${fileDownloadedSql('counted', now, this.downloadEvents)},
      exhausted AS (${linkExhaustedSql('link', 'counted', now)})${audited}
      SELECT (SELECT count(*) FROM dropped_downloads)::integer AS dropped`;
    const dropped = rows[0]?.dropped ?? 0;
    if (dropped > 0) this.downloadEvents.onDropped?.(dropped);
  }
}

/** The file's columns in resolve(): its expiry is renamed, as the link's own would shadow it. */
interface ResolvedFileColumns {
  account_id: number;
  filename: string;
  size: bigint;
  sha256: string | null;
  storage_key: string;
  link_token: string;
  file_expires_at: Date | null;
}

const fileOf = (row: LinkRow & ResolvedFileColumns): LinkedFile => ({
  id: row.file_id,
  accountId: row.account_id,
  filename: row.filename,
  size: Number(row.size),
  sha256: row.sha256,
  storageKey: row.storage_key,
  linkToken: row.link_token,
  expiresAt: row.file_expires_at,
});
