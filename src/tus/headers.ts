// Parsing and writing the tus 1.0.0 headers (https://tus.io/protocols/resumable-upload).
import { AppError, badRequest } from '../errors.js';
import type { CodeOf } from '../error-codes.js';
import type { UploadStatus } from './uploads.js';
import { publicLink } from '../files/present.js';

export const TUS_VERSION = '1.0.0';
export const TUS_EXTENSIONS = 'creation,creation-with-upload,creation-defer-length,termination,expiration,checksum';
export const TUS_CONTENT_TYPE = 'application/offset+octet-stream';
/** Headers an upload's finishing response carries (PATCH, HEAD): the file it became. */
export const FILE_ID_HEADER = 'Dropstream-File-Id';
export const PUBLIC_LINK_HEADER = 'Dropstream-Public-Link';

/** For CORS: what browsers may send and read. */
export const TUS_REQUEST_HEADERS = ['Tus-Resumable', 'Upload-Length', 'Upload-Defer-Length', 'Upload-Offset', 'Upload-Metadata', 'Upload-Checksum'];
export const TUS_RESPONSE_HEADERS = ['Location', 'Tus-Resumable', 'Tus-Version', 'Tus-Extension', 'Tus-Max-Size', 'Tus-Checksum-Algorithm', 'Upload-Offset', 'Upload-Length', 'Upload-Defer-Length', 'Upload-Expires', FILE_ID_HEADER, PUBLIC_LINK_HEADER];

/** A byte count in a header: digits only, at most 2^53 - 1. */
function bytes(value: string, code: CodeOf<400>, name: string): number {
  const n = /^[0-9]{1,16}$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n)) throw badRequest(code, `${name} must be a non-negative integer`);
  return n;
}

export const parseLength = (value: string) => bytes(value, 'invalid_upload_length', 'Upload-Length');
export const parseOffset = (value: string) => bytes(value, 'invalid_upload_offset', 'Upload-Offset');

/** Refuses requests of another protocol version (412, with the one we speak). */
export function checkTusVersion(value: string): void {
  if (value === TUS_VERSION) return;
  // No header at all is most often not a tus client: curl --data-binary aimed at the resumable endpoint.
  const message = value
    ? `Tus-Resumable must be ${TUS_VERSION}`
    : `Tus-Resumable: ${TUS_VERSION} is missing: /api/v1/uploads speaks tus (resumable uploads, see the README or use a tus client); ` +
      'a plain upload is POST /api/v1/files/upload with multipart/form-data, curl -F "file=@report.pdf"';
  throw new AppError('tus_version_unsupported', message, { 'Tus-Version': TUS_VERSION });
}

/** Upload-Metadata: comma-separated `key base64value` pairs (the value may be absent); keys unique. */
export function parseMetadata(header: string): Map<string, Buffer> {
  const metadata = new Map<string, Buffer>();
  if (header.trim() === '') return metadata;
  for (const pair of header.split(',')) {
    const [key, value = '', ...rest] = pair.trim().split(' ');
    const valid = key && rest.length === 0 && /^[\x21-\x7e]+$/.test(key) && /^[A-Za-z0-9+/]*={0,2}$/.test(value) && value.length % 4 === 0;
    if (!valid || metadata.has(key)) throw badRequest('invalid_upload_metadata', 'Upload-Metadata must be comma-separated "key base64value" pairs with unique keys');
    metadata.set(key, Buffer.from(value, 'base64'));
  }
  return metadata;
}

/** Upload-Checksum: `sha256 <base64 digest>`; the digest, or undefined when absent. */
export function parseChecksum(header: string): Buffer | undefined {
  if (header === '') return undefined;
  const [algorithm, digest = ''] = header.split(' ');
  if (algorithm !== 'sha256') throw badRequest('unsupported_checksum_algorithm', 'Upload-Checksum supports sha256 only');
  const value = /^[A-Za-z0-9+/]{43}=$/.test(digest) ? Buffer.from(digest, 'base64') : undefined;
  if (value?.length !== 32) throw badRequest('invalid_checksum', 'Upload-Checksum must be "sha256 <base64 of the 32-byte digest>"');
  return value;
}

/** The headers that describe an upload's state (HEAD, PATCH, POST responses). */
export function statusHeaders(status: UploadStatus, publicUrl: string): Record<string, string> {
  const headers: Record<string, string> = { 'Upload-Offset': String(status.offset) };
  if (status.length === undefined) headers['Upload-Defer-Length'] = '1';
  else headers['Upload-Length'] = String(status.length);
  if (status.file) {
    headers[FILE_ID_HEADER] = String(status.file.id);
    headers[PUBLIC_LINK_HEADER] = publicLink(publicUrl, status.file.linkToken);
  } else {
    headers['Upload-Expires'] = status.expiresAt.toUTCString();
  }
  return headers;
}
