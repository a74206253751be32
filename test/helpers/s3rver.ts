// s3rver (an S3 API server written in JavaScript) in this process, for tests.
// MinIO is what operators run; it cannot be installed here.
//
// s3rver lacks three calls that MinIO and AWS have and that our store uses:
// AbortMultipartUpload, ListMultipartUploads and ListParts (and its paging of
// ListObjectsV2 fails on Node 17 and later: see below). They are added below on top
// of s3rver's own on-disk layout (an upload is a folder of parts under
// <bucket>/._S3rver_uploads/<uploadId>, with the object key in a `key` file),
// so aborts really remove parts and "open uploads" reflects what s3rver holds.
// The listing pages as S3 does (max-uploads, key-marker, upload-id-marker,
// sorted by key then upload id) and says when each upload was initiated.
// Tests reach this through test-s3.ts, which can use a real S3 instead.
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';

export const S3_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

export interface TestS3 {
  endpoint: string;
  directory: string;
  /** Environment that points the server at this s3rver and `bucket`. */
  env(bucket: string): Record<string, string>;
  /** Stops answering: closes the listener and cuts every open connection. */
  stop(): Promise<void>;
  /** Listens again on the same port, with the same data. */
  start(): Promise<void>;
  close(): Promise<void>;
}

const uploadsDir = (directory: string, bucket: string) => join(directory, bucket, '._S3rver_uploads');

const xml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function multipartExtensions(directory: string) {
  return async (ctx: any, next: () => Promise<void>) => {
    const [, bucket, key] = /^\/([^/]+)\/?(.*)$/.exec(ctx.path) ?? [];
    if (bucket && key && ctx.method === 'DELETE' && typeof ctx.query.uploadId === 'string') {
      const dir = join(uploadsDir(directory, bucket), ctx.query.uploadId);
      const exists = await readFile(join(dir, 'key')).then(() => true, () => false);
      if (!exists) {
        ctx.status = 404;
        ctx.type = 'application/xml';
        ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message></Error>';
        return;
      }
      await rm(dir, { recursive: true, force: true });
      ctx.status = 204;
      return;
    }
    if (bucket && key && ctx.method === 'GET' && typeof ctx.query.uploadId === 'string') {
      // ListParts (uploads straight to the store, src/storage/s3-direct.ts): each part is a file named by
      // its number beside its MD5 (<number>.md5), which is its ETag. One page: tests hold few parts.
      const dir = join(uploadsDir(directory, bucket), ctx.query.uploadId);
      const names = await readdir(dir).catch(() => undefined);
      ctx.type = 'application/xml';
      if (!names) {
        ctx.status = 404;
        ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message></Error>';
        return;
      }
      // s3rver writes a part's file as it arrives and its .md5 once it is whole: a part
      // without one is still arriving, or was cut mid-PUT (s3rver leaves it). S3 lists neither.
      const numbers = names.filter((n) => /^\d+$/.test(n) && names.includes(`${n}.md5`)).map(Number).sort((a, b) => a - b);
      const parts = await Promise.all(
        numbers.map(async (n) => {
          const [info, md5] = await Promise.all([stat(join(dir, String(n))), readFile(join(dir, `${n}.md5`), 'utf8')]);
          return `<Part><PartNumber>${n}</PartNumber><ETag>"${md5.trim()}"</ETag><Size>${info.size}</Size><LastModified>${info.mtime.toISOString()}</LastModified></Part>`;
        }),
      );
      ctx.body =
        '<?xml version="1.0" encoding="UTF-8"?>\n<ListPartsResult>' +
        `<Bucket>${xml(bucket)}</Bucket><Key>${xml(key)}</Key><UploadId>${xml(ctx.query.uploadId)}</UploadId><IsTruncated>false</IsTruncated>` +
        parts.join('') +
        '</ListPartsResult>';
      return;
    }
    if (bucket && !key && ctx.method === 'GET' && 'uploads' in ctx.query) {
      const ids = await readdir(uploadsDir(directory, bucket)).catch(() => [] as string[]);
      const uploads = await Promise.all(
        ids.map(async (id) => {
          const keyFile = join(uploadsDir(directory, bucket), id, 'key');
          const [key, info] = await Promise.all([readFile(keyFile, 'utf8').catch(() => ''), stat(keyFile).catch(() => undefined)]);
          return { id, key, initiated: info?.mtime ?? new Date() };
        }),
      );
      const max = Math.min(Number(ctx.query['max-uploads'] ?? 1000) || 1000, 1000);
      const keyMarker = String(ctx.query['key-marker'] ?? '');
      const idMarker = String(ctx.query['upload-id-marker'] ?? '');
      const after = uploads
        .filter((u) => u.key && (u.key > keyMarker || (u.key === keyMarker && idMarker !== '' && u.id > idMarker)))
        .sort((a, b) => (a.key === b.key ? (a.id < b.id ? -1 : 1) : a.key < b.key ? -1 : 1));
      const page = after.slice(0, max);
      const last = page[page.length - 1];
      const truncated = after.length > max && last;
      ctx.type = 'application/xml';
      ctx.body =
        '<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult>' +
        `<Bucket>${xml(bucket)}</Bucket><MaxUploads>${max}</MaxUploads><IsTruncated>${truncated ? 'true' : 'false'}</IsTruncated>` +
        (truncated ? `<NextKeyMarker>${xml(last.key)}</NextKeyMarker><NextUploadIdMarker>${xml(last.id)}</NextUploadIdMarker>` : '') +
        page
          .map((u) => `<Upload><Key>${xml(u.key)}</Key><UploadId>${xml(u.id)}</UploadId><Initiated>${u.initiated.toISOString()}</Initiated></Upload>`)
          .join('') +
        '</ListMultipartUploadsResult>';
      return;
    }
    // s3rver makes ListObjectsV2's continuation token with DES, which
    // OpenSSL 3 (Node 17 and later) does not have: every truncated V2
    // listing answers 500. The store pages by StartAfter with MaxKeys and
    // never sends a token, so such a listing is answered as a V1 listing
    // from the same key (same Contents and IsTruncated, which is all the
    // store reads; V1 has no KeyCount, which listings without MaxKeys keep).
    const paged = 'max-keys' in ctx.query || 'start-after' in ctx.query;
    if (bucket && !key && ctx.method === 'GET' && ctx.query['list-type'] === '2' && paged && !('continuation-token' in ctx.query)) {
      const { 'list-type': _type, 'start-after': startAfter, 'fetch-owner': _owner, ...rest } = ctx.query;
      ctx.query = { ...rest, ...(startAfter ? { marker: startAfter } : {}) };
    }
    await next();
  };
}

export async function startS3rver(): Promise<TestS3> {
  const directory = await mkdtemp(join(tmpdir(), 'dropstream-s3rver-'));
  let server: Server | undefined;
  let port = 0;

  // A new s3rver each time: a closed one has shut its logger down and would
  // print every request on restart. The data stays in `directory`.
  const start = async () => {
    const app = new S3rver({ port, address: '127.0.0.1', silent: true, directory }) as any;
    app.middleware.unshift(multipartExtensions(directory));
    const address = (await app.run()) as AddressInfo;
    server = app.httpServer as Server;
    // Later starts reuse the port, so clients configured with it reconnect.
    port = address.port;
  };
  const stop = async () => {
    if (!server) return;
    const closing = once(server, 'close');
    server.close();
    server.closeAllConnections();
    await closing;
    server = undefined;
  };
  await start();
  const endpoint = `http://127.0.0.1:${port}`;

  return {
    endpoint,
    directory,
    env: (bucket) => ({
      S3_ENDPOINT: endpoint,
      S3_BUCKET: bucket,
      S3_ACCESS_KEY_ID: S3_CREDENTIALS.accessKeyId,
      S3_SECRET_ACCESS_KEY: S3_CREDENTIALS.secretAccessKey,
      S3_FORCE_PATH_STYLE: 'true',
    }),
    stop,
    start,
    async close() {
      await stop();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
