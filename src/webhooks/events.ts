// The events a webhook endpoint can receive, and the SQL that writes them to
// the outbox (webhook_messages) inside the statement that writes the fact
// they report: a file row and its file.uploaded event commit together, or
// neither (the files statements are single statements: src/files/file-rows.ts).
import { Prisma } from '../generated/prisma/client.js';
import { formatDate } from '../wire-date.js';

export const EVENT_TYPES = ['file.uploaded', 'file.deleted', 'file.downloaded', 'link.exhausted', 'upload.expired'] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** The file as the API shows it (src/http/present.ts), plus sha256, from the files columns of `f`. */
const FILE_DATA = Prisma.sql`jsonb_build_object(
      'file_id', f.id, 'filename', f.filename, 'size', f.size, 'sha256', f.sha256,
      'upload_date', to_char(f.created_at, 'YYYY-MM-DD HH24:MI:SS'),
      'download_count', f.download_count,
      'expires_at', to_char(f.expires_at, 'YYYY-MM-DD HH24:MI:SS'),
      'request_id', f.request_id)`;

/** One message per enabled endpoint of the account (f.account_id) that asked for `type`, with `data` as the body's data. */
const messagesSql = (type: EventType, data: Prisma.Sql, from: Prisma.Sql, now: Date) => Prisma.sql`
  INSERT INTO webhook_messages (id, endpoint_id, type, body, next_attempt_at, created_at)
  SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), e.id, ${type}::text,
    jsonb_build_object('type', ${type}::text, 'timestamp', ${now.toISOString()}::text, 'data', ${data})::text,
    ${now}::timestamp(3), ${now}::timestamp(3)
  FROM ${from}
  JOIN webhook_endpoints e ON e.account_id = f.account_id AND e.disabled_at IS NULL AND ${type}::text = ANY(e.events)`;

/**
 * A CTE body inserting one message per enabled endpoint of the file's
 * account that asked for `type` (fan-out at write time: each endpoint's
 * delivery has its own row, attempts and webhook-id; docs/decisions.md).
 * `source` names a CTE with the files columns (inserted, removed, counted).
 *
 * The body is rendered here, once, as text: every retry sends (and signs)
 * the same bytes. `data` is the file without public_link (it carries the
 * link's secret token, and the relay knows no PUBLIC_URL).
 */
export const fileEventSql = (type: 'file.uploaded' | 'file.deleted' | 'file.downloaded', source: 'inserted' | 'removed' | 'counted', now: Date) =>
  messagesSql(type, FILE_DATA, Prisma.sql`${Prisma.raw(source)} f`, now);

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
  );
