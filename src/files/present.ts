// How records look on the wire: snake_case, integers in bytes, UTC dates.
// Each answer's type is its schema's (src/files/schemas.ts,
// src/links/schemas.ts), which the OpenAPI document is built from.
import type { LinkRecord } from '../links/links.js';
import type { FileListing } from './record.js';
import { formatOptionalDate } from '../wire-date.js';
import { publicLink, wireFileForApi, type WireFile } from '../file-wire.js';
import type { FileAnswer, UploadAnswer } from './schemas.js';
import type { LinkAnswer } from '../links/schemas.js';

export { publicLink };

/** The table's API file and the schema's answer are the same type (a field added to one only fails the typecheck). */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameShape: Same<WireFile<'api'>, FileAnswer> = true;
void sameShape;

/**
 * A file record (the single-file answer, list items): the API's fields of
 * src/file-wire.ts, the table the files list's SQL and the webhook events'
 * file are written from too.
 */
export function presentFile(file: FileListing, publicUrl: string): FileAnswer {
  return wireFileForApi(file, publicUrl);
}

/**
 * The answer to an upload: the spec's four fields and nothing else (the spec
 * says "only"; issue 50). A file's expiry is read from GET /files/{file_id}.
 */
export function presentUpload(file: FileListing, publicUrl: string): UploadAnswer {
  return {
    success: true as const,
    file_id: file.id,
    public_link: publicLink(publicUrl, file.linkToken),
    size: file.size,
    filename: file.filename,
  };
}

/** A link of a file (the links API): its URL, whether it is the file's public_link, its rules and count. */
export function presentLink(link: LinkRecord, publicUrl: string): LinkAnswer {
  return {
    link_id: link.id,
    public_link: publicLink(publicUrl, link.token),
    primary: link.primary,
    expires_at: formatOptionalDate(link.expiresAt),
    max_downloads: link.maxDownloads ?? null,
    download_count: link.downloadCount,
    password_protected: link.passwordProtected,
  };
}
