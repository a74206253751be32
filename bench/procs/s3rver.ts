// s3rver in a process of its own, so the service's memory and CPU are
// measured apart from the store's. It is the "S3" every party writes to.
// The test helper adds AbortMultipartUpload and ListMultipartUploads, which
// s3rver lacks and our store uses; tus-node-server's S3 store also needs
// ListParts (it lists the parts before every PATCH and to complete an
// upload), added here on s3rver's own layout: an upload is a folder
// <bucket>/._S3rver_uploads/<uploadId> holding files <n> and <n>.md5.
// Prints {"endpoint", "directory"} when ready.
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import S3rver from 's3rver';
import { startS3rver } from '../../test/helpers/s3rver.js';

const xml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

async function listParts(ctx: any, next: () => Promise<void>): Promise<void> {
  const [, bucket, key] = /^\/([^/]+)\/(.+)$/.exec(ctx.path) ?? [];
  const uploadId = ctx.query.uploadId;
  if (!(ctx.method === 'GET' && bucket && key && typeof uploadId === 'string' && !('partNumber' in ctx.query))) return next();
  const dir = join(ctx.app.store.getResourcePath(bucket, undefined, 'uploads'), uploadId);
  const names = await readdir(dir).catch(() => undefined);
  if (!names) {
    ctx.status = 404;
    ctx.type = 'application/xml';
    ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message></Error>';
    return;
  }
  const numbers = names.filter((n) => /^\d+$/.test(n)).map(Number).sort((a, b) => a - b);
  const parts = await Promise.all(
    numbers.map(async (n) => {
      const [md5, info] = await Promise.all([readFile(join(dir, `${n}.md5`), 'utf8'), stat(join(dir, String(n)))]);
      return `<Part><PartNumber>${n}</PartNumber><LastModified>${info.mtime.toISOString()}</LastModified><ETag>"${md5}"</ETag><Size>${info.size}</Size></Part>`;
    }),
  );
  ctx.type = 'application/xml';
  ctx.body =
    '<?xml version="1.0" encoding="UTF-8"?>\n<ListPartsResult>' +
    `<Bucket>${xml(bucket)}</Bucket><Key>${xml(decodeURIComponent(key))}</Key><UploadId>${xml(uploadId)}</UploadId>` +
    `<MaxParts>10000</MaxParts><IsTruncated>false</IsTruncated>${parts.join('')}</ListPartsResult>`;
}

// The helper builds and runs the S3rver itself; add our middleware as it runs.
const proto = (S3rver as any).prototype;
const run = proto.run;
proto.run = function (this: any, ...args: unknown[]) {
  this.middleware.unshift(listParts);
  return run.apply(this, args);
};

const s3 = await startS3rver();
process.stdout.write(`${JSON.stringify({ endpoint: s3.endpoint, directory: s3.directory })}\n`);
const stop = async () => {
  await s3.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
