// The events a webhook endpoint can receive, and the SQL that writes them to
// the outbox (webhook_messages) inside the statement that writes the fact
// they report: a file row and its file.uploaded event commit together, or
// neither (the files statements are single statements: src/files/file-rows.ts).
import { Prisma } from '../generated/prisma/client.js';

export const EVENT_TYPES = ['file.uploaded', 'file.deleted', 'file.downloaded', 'link.exhausted', 'upload.expired'] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/**
 * A CTE body inserting one message per enabled endpoint of the file's
 * account that asked for `type` (fan-out at write time: each endpoint's
 * delivery has its own row, attempts and webhook-id). `source` names a CTE
 * or table with the files columns (inserted, removed).
 *
 * The body is rendered here, once, as text: every retry sends (and signs)
 * the same bytes. `data` is the file as the API shows it (src/http/present.ts)
 * without public_link (the relay knows no PUBLIC_URL and the link's token is
 * a secret better fetched with the key), plus sha256.
 */
export const fileEventSql = (type: EventType, source: 'inserted' | 'removed', now: Date) => Prisma.sql`
  INSERT INTO webhook_messages (id, endpoint_id, type, body, next_attempt_at, created_at)
  SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), e.id, ${type}::text,
    jsonb_build_object('type', ${type}::text, 'timestamp', ${now.toISOString()}::text, 'data', jsonb_build_object(
      'file_id', f.id, 'filename', f.filename, 'size', f.size, 'sha256', f.sha256,
      'upload_date', to_char(f.created_at, 'YYYY-MM-DD HH24:MI:SS'),
      'download_count', f.download_count,
      'expires_at', to_char(f.expires_at, 'YYYY-MM-DD HH24:MI:SS')))::text,
    ${now}::timestamp(3), ${now}::timestamp(3)
  FROM ${Prisma.raw(source)} f
  JOIN webhook_endpoints e ON e.account_id = f.account_id AND e.disabled_at IS NULL AND ${type}::text = ANY(e.events)`;
