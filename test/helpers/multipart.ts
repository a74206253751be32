// Multipart bodies built byte by byte, so tests control every detail a
// hostile or broken client could get wrong.
export interface Part {
  name: string;
  /** Omit for a plain field; a file part has a filename. */
  filename?: string;
  content: Buffer | string;
}

export const BOUNDARY = 'dropstream-test-boundary';

export function multipartBody(parts: Part[], boundary = BOUNDARY): Buffer {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const filename = part.filename === undefined ? '' : `; filename="${part.filename.replace(/["\\]/g, '\\$&')}"`;
    const type = part.filename === undefined ? '' : '\r\nContent-Type: application/octet-stream';
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"${filename}${type}\r\n\r\n`));
    chunks.push(Buffer.from(part.content));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

export const multipartType = (boundary = BOUNDARY) => `multipart/form-data; boundary=${boundary}`;
