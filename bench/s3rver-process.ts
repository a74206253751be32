// s3rver in a process of its own, so a benchmark measures the service's
// memory and CPU apart from the store's. Prints {"endpoint": ...} when ready.
import { startS3rver } from '../test/helpers/s3rver.js';

const s3 = await startS3rver();
process.stdout.write(`${JSON.stringify({ endpoint: s3.endpoint, directory: s3.directory })}\n`);
const stop = async () => {
  await s3.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
