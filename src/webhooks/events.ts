// The events a webhook endpoint can receive, and the SQL that writes them to
// the outbox (webhook_messages) inside the statement that writes the fact
// they report: a file row and its file.uploaded event commit together, or
// neither (the files statements are single statements: src/files/file-rows.ts).
import { Prisma } from '../generated/prisma/client.js';
import { formatDate } from '../wire-date.js';
import { eventFileSql } from '../file-wire.js';

export const EVENT_TYPES = ['file.uploaded', 'file.deleted', 'file.downloaded', 'link.exhausted', 'upload.expired'] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/**
 * The file as the API shows it, without public_link, plus sha256, from the
 * files columns of `f`: the event's fields of the table presentFile and the
 * files list are written from too (src/file-wire.ts).
 */
const FILE_DATA = eventFileSql();

/**
 * One message per enabled endpoint of the account (f.account_id) that asked
 * for `type` (and passes `only`, a condition on `e`), with `data` as the
 * body's data and `fileId` as its file_id.
 */
const messagesSql = (type: EventType, data: Prisma.Sql, from: Prisma.Sql, now: Date, fileId: Prisma.Sql, only: Prisma.Sql = Prisma.sql`TRUE`) => Prisma.sql`
  INSERT INTO webhook_messages (id, endpoint_id, type, body, next_attempt_at, created_at, file_id)
  SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), e.id, ${type}::text,
    jsonb_build_object('type', ${type}::text, 'timestamp', ${now.toISOString()}::text, 'data', ${data})::text,
    ${now}::timestamp(3), ${now}::timestamp(3), ${fileId}
  FROM ${from}
  JOIN webhook_endpoints e ON e.account_id = f.account_id AND e.disabled_at IS NULL AND ${type}::text = ANY(e.events) AND ${only}`;

/**
 * A CTE body inserting one message per enabled endpoint of the file's
 * account that asked for `type` (fan-out at write time: each endpoint's
 * delivery has its own row, attempts and webhook-id; docs/decisions.md).
 * `source` names a CTE with the files columns (inserted, removed; a counted
 * download goes through fileDownloadedSql, below).
 *
 * The body is rendered here, once, as text: every retry sends (and signs)
 * the same bytes. `data` is the file without public_link (it carries the
 * link's secret token, and the relay knows no PUBLIC_URL).
 */
export const fileEventSql = (type: 'file.uploaded' | 'file.deleted', source: 'inserted' | 'removed', now: Date) =>
  messagesSql(type, FILE_DATA, Prisma.sql`${Prisma.raw(source)} f`, now, Prisma.sql`f.id`);

/** Undelivered file.downloaded messages one webhook may hold (WEBHOOK_PENDING_DOWNLOADS), and who is told of those dropped. */
export interface DownloadEventLimits {
  pending: number;
  /** Told how many endpoints' file.downloaded one download could not write (the composition root counts them in /metrics). */
  onDropped?: (count: number) => void;
}

export const DEFAULT_DOWNLOAD_EVENT_LIMITS: DownloadEventLimits = { pending: 1000 };

/**
 * file.downloaded, as CTEs named download_targets, replaced_downloads,
 * downloaded and dropped_downloads, for the statement that counts a download
 * (`source` names a CTE of files columns after the count).
 *
 * Downloads need no key, so anyone can make them: a webhook holds at most
 * `pending` undelivered file.downloaded messages (its receiver slow or
 * down). At that bound the new message takes the place of one of the same
 * file's undelivered ones (its download_count covers theirs), or, when
 * the webhook holds none of that file, it is not written: dropped_downloads
 * names those webhooks and the caller counts them. Other events are never
 * dropped: uploads, deletions and expiries are bounded by the plan's limits,
 * not by strangers.
 *
 * One message replaced per webhook (the first the index gives: no sort of
 * the file's messages), not all of the file's: a statement that
 * locks one message row per webhook cannot deadlock with the relay giving
 * a webhook up (which locks the webhook's row, then all its pending
 * messages). The count reads at most `pending` entries of a partial index;
 * downloads of different files at once may each pass a bound of one left
 * (it is exact within one statement's snapshot, not across concurrent ones).
 */
export const fileDownloadedSql = (source: 'counted', now: Date, limits: DownloadEventLimits) => Prisma.sql`
  download_targets AS (
    SELECT e.id AS endpoint_id, (
      SELECT count(*) FROM (
        SELECT 1 FROM webhook_messages p
        WHERE p.endpoint_id = e.id AND p.type = 'file.downloaded' AND p.next_attempt_at IS NOT NULL LIMIT ${limits.pending}
      ) held
    ) >= ${limits.pending} AS at_bound
    FROM ${Prisma.raw(source)} f
    JOIN webhook_endpoints e ON e.account_id = f.account_id AND e.disabled_at IS NULL AND 'file.downloaded' = ANY(e.events)
  ), replaced_downloads AS (
    DELETE FROM webhook_messages WHERE id IN (
      SELECT (
        SELECT m.id FROM webhook_messages m
        WHERE m.endpoint_id = t.endpoint_id AND m.type = 'file.downloaded' AND m.file_id = f.id AND m.next_attempt_at IS NOT NULL
        LIMIT 1
      )
      FROM download_targets t, ${Prisma.raw(source)} f WHERE t.at_bound
    )
    RETURNING endpoint_id
  ), downloaded AS (${messagesSql(
    'file.downloaded',
    FILE_DATA,
    Prisma.sql`${Prisma.raw(source)} f`,
    now,
    Prisma.sql`f.id`,
    Prisma.sql`(e.id IN (SELECT endpoint_id FROM download_targets WHERE NOT at_bound) OR e.id IN (SELECT endpoint_id FROM replaced_downloads))`,
  )}), dropped_downloads AS (
    SELECT endpoint_id FROM download_targets WHERE at_bound AND endpoint_id NOT IN (SELECT endpoint_id FROM replaced_downloads)
  )`;

/**
 * link.exhausted, as a CTE body: when the link of `link` (a CTE of links
 * columns, after this download was counted) has just reached its
 * max_downloads, with the file of `file` (after the count too).
 */
export const linkExhaustedSql = (link: 'link', file: 'counted', now: Date) =>
  messagesSql(
    'link.exhausted',
    Prisma.sql`jsonb_build_object('link_id', l.id, 'max_downloads', l.max_downloads, 'download_count', l.download_count, 'file', ${FILE_DATA})`,
    Prisma.sql`${Prisma.raw(link)} l JOIN ${Prisma.raw(file)} f ON f.id = l.file_id AND l.max_downloads IS NOT NULL AND l.download_count = l.max_downloads`,
    now,
    Prisma.sql`f.id`,
  );

/** A tus upload swept unfinished, as the sweep forgets it (in its transaction). */
export interface ExpiredUpload {
  id: string;
  accountId: number;
  filename: string;
  length?: number;
  offset: number;
  createdAt: Date;
}

/** upload.expired: a statement of its own, run in the transaction that forgets the upload's records. */
export const uploadExpiredSql = (upload: ExpiredUpload, now: Date) =>
  messagesSql(
    'upload.expired',
    Prisma.sql`jsonb_build_object('upload_id', ${upload.id}::text, 'filename', ${upload.filename}::text, 'length', ${upload.length ?? null}::bigint,
      'offset', ${BigInt(upload.offset)}::bigint, 'created_at', ${formatDate(upload.createdAt)}::text)`,
    Prisma.sql`(SELECT ${upload.accountId}::integer AS account_id) f`,
    now,
    Prisma.sql`NULL::integer`,
  );
