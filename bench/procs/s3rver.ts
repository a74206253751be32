// s3rver in a process of its own, so the service's memory and CPU are
// measured apart from the store's. It is the "S3" every party writes to.
// The test helper adds the calls s3rver lacks and the parties use
// (AbortMultipartUpload, ListMultipartUploads, and ListParts, which
// tus-node-server's S3 store lists before every PATCH and our direct
// uploads' complete reads).
// Prints {"endpoint", "directory"} when ready.
import { startS3rver } from '../../test/helpers/s3rver.js';

const s3 = await startS3rver();
process.stdout.write(`${JSON.stringify({ endpoint: s3.endpoint, directory: s3.directory })}\n`);
const stop = async () => {
  await s3.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
