// How records look on the wire: snake_case, integers in bytes, UTC dates.
// Each answer's type is its schema's (src/files/schemas.ts,
// src/links/schemas.ts), which the OpenAPI document is built from.
import type { LinkRecord } from '../links/links.js';
import type { FileListing } from './record.js';
import { formatDate, formatOptionalDate } from '../wire-date.js';
import type { FileAnswer, UploadAnswer } from './schemas.js';
import type { LinkAnswer } from '../links/schemas.js';

export const publicLink = (publicUrl: string, token: string) => `${publicUrl}/download/${token}`;


/** A file record (the single-file answer, list items). */
export function presentFile(file: FileListing, publicUrl: string): FileAnswer {
  return {
    file_id: file.id,
    filename: file.filename,
    size: file.size,
    upload_date: formatDate(file.createdAt),
    download_count: file.downloadCount,
    public_link: publicLink(publicUrl, file.linkToken),
    expires_at: formatOptionalDate(file.expiresAt),
    // The file request it came through (src/requests/); null for the owner's own uploads.
    request_id: file.requestId ?? null,
  };
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
