// A file on the wire, written once (issue 52, "webhook payloads are built from
// the same presenters as the API's answers"): each field's name, its place,
// its value from a record (TypeScript) and from a files row (PostgreSQL), and
// who shows it. Three writers derive from this table: presentFile (the
// single-file answer, src/files/present.ts), the files list the database
// writes as JSON text (src/files/service.ts) and the file in a webhook
// event's data (src/webhooks/events.ts). A foundation, not files/: files
// imports webhooks (its statements write their events), so webhooks may not
// import files.
import { Prisma } from './generated/prisma/client.js';
import { formatDate, formatOptionalDate, sqlDate } from './wire-date.js';

/** A file's public download URL: its primary link under PUBLIC_URL. */
export const publicLink = (publicUrl: string, token: string) => `${publicUrl}/download/${token}`;

/** What the fields are read from: a file record (src/files/record.ts's FileRecord, or its FileListing for the API's fields). */
export interface WireFileSource {
  id: number;
  filename: string;
  size: number;
  sha256?: string | null;
  downloadCount: number;
  linkToken: string;
  createdAt: Date;
  expiresAt: Date | null;
  requestId?: string | null;
}

/** Where a field is shown: the API's answers (a file, list items), a webhook event's file, or both. */
export type WireSide = 'api' | 'event';

interface WireField<N extends string, V, S extends readonly WireSide[]> {
  name: N;
  in: S;
  /** Why a field is one side's only (required then: the test in test/webhooks/event-file.test.ts reads it). */
  only?: string;
  /** The files columns `sql` reads. */
  columns: readonly string[];
  value: (file: WireFileSource, publicUrl: string) => V;
  /** The same value from `f`, a files row; `publicUrl` is a bound parameter (only an API field may use it: the relay knows no PUBLIC_URL). */
  sql: (publicUrl: string) => Prisma.Sql;
}

const field = <N extends string, V, const S extends readonly WireSide[]>(f: WireField<N, V, S>) => f;

const BOTH = ['api', 'event'] as const;

/** In the order the API writes them (JSON.stringify and row_to_json keep it; jsonb sorts an event's keys its own way). */
export const FILE_WIRE_FIELDS = [
  field({ name: 'file_id', in: BOTH, columns: ['id'], value: (f) => f.id, sql: () => Prisma.sql`f.id` }),
  field({ name: 'filename', in: BOTH, columns: ['filename'], value: (f) => f.filename, sql: () => Prisma.sql`f.filename` }),
  field({ name: 'size', in: BOTH, columns: ['size'], value: (f) => f.size, sql: () => Prisma.sql`f.size` }),
  field({
    name: 'sha256',
    in: ['event'],
    only: 'a receiver checks what it fetches against it; the API has never shown it (SPEC.md\'s file record)',
    columns: ['sha256'],
    // null for an upload straight to the store whose client declared none (src/direct/).
    value: (f) => f.sha256 ?? null,
    sql: () => Prisma.sql`f.sha256`,
  }),
  field({ name: 'upload_date', in: BOTH, columns: ['created_at'], value: (f) => formatDate(f.createdAt), sql: () => sqlDate('f.created_at') }),
  field({ name: 'download_count', in: BOTH, columns: ['download_count'], value: (f) => f.downloadCount, sql: () => Prisma.sql`f.download_count` }),
  field({
    name: 'public_link',
    in: ['api'],
    only: 'it carries the link\'s secret token, and the relay knows no PUBLIC_URL (docs/webhooks.md)',
    columns: ['link_token'],
    value: (f, publicUrl) => publicLink(publicUrl, f.linkToken),
    sql: (publicUrl) => Prisma.sql`${publicUrl}::text || '/download/' || f.link_token`,
  }),
  field({ name: 'expires_at', in: BOTH, columns: ['expires_at'], value: (f) => formatOptionalDate(f.expiresAt), sql: () => sqlDate('f.expires_at') }),
  // The file request it came through (src/requests/); null for the owner's own uploads.
  field({ name: 'request_id', in: BOTH, columns: ['request_id'], value: (f) => f.requestId ?? null, sql: () => Prisma.sql`f.request_id` }),
] as const;

type Fields = (typeof FILE_WIRE_FIELDS)[number];
/** The table's fields `S` shows (distributed over the union of fields). */
type On<S extends WireSide, F = Fields> = F extends { in: readonly (infer T)[] } ? (S extends T ? F : never) : never;

/** A file as `side` shows it, by the table. */
export type WireFile<S extends WireSide> = { [F in On<S> as F['name']]: ReturnType<F['value']> };

/** The fields `side` shows, in order. */
export const wireFields = (side: WireSide) => FILE_WIRE_FIELDS.filter((f) => (f.in as readonly WireSide[]).includes(side));

const API_FIELDS = wireFields('api');
const EVENT_FIELDS = wireFields('event');

/** The file as the API shows it (keys in the table's order: JSON.stringify writes them so). */
export function wireFileForApi(file: WireFileSource, publicUrl: string): WireFile<'api'> {
  const out: Record<string, unknown> = {};
  for (const f of API_FIELDS) out[f.name] = f.value(file, publicUrl);
  return out as WireFile<'api'>;
}

/**
 * The API's file from `f` (a subquery of the files columns listApiColumns
 * names), as one row whose columns are the fields, for row_to_json: its
 * text is wireFileForApi's through JSON.stringify, to the byte
 * (test/files/files-list-json.test.ts).
 */
export const apiFileColumnsSql = (publicUrl: string) =>
  Prisma.join(API_FIELDS.map((f) => Prisma.sql`${f.sql(publicUrl)} AS ${Prisma.raw(`"${f.name}"`)}`), ', ');

/** The files columns the API's fields read. */
export const API_FILE_COLUMNS = [...new Set(API_FIELDS.flatMap((f) => f.columns))];

/** The file in an event's data, from `f` (a row with the files columns), as a jsonb object. */
export const eventFileSql = () =>
  Prisma.sql`jsonb_build_object(${Prisma.join(EVENT_FIELDS.map((f) => Prisma.sql`${Prisma.raw(`'${f.name}'`)}, ${f.sql('')}`), ', ')})`;
