// Which object store a server writes to, chosen once here: the server asks
// for "the store" and never branches on the kind. A third store is one class
// behind ObjectStore, its run of the contract suite (test/contract), and a
// case below.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { LocalObjectStore } from './local.js';
import type { ObjectStore } from './object-store.js';
import type { StoreCallObserver } from './store-deadlines.js';

export interface OpenedStore {
  store: ObjectStore;
  /** How long a multipart upload may live in the store (seconds), when a lifecycle rule says. */
  uploadLifetime?: number;
}

export async function openStore(config: Config, logger: Logger, observe: StoreCallObserver): Promise<OpenedStore> {
  const deadlines = config.storeDeadlines;
  if (config.store === 'local') return { store: new LocalObjectStore({ root: join(config.dataDir, 'objects'), deadlines, observe }) };
  // The AWS SDK is loaded only for the S3 store (about 30 MiB of RSS otherwise).
  // require, not import(): it shares the module instances of this file's own
  // imports under tsx too (ObjectStoreError must be one class for instanceof).
  const { S3ObjectStore } = createRequire(import.meta.url)('./s3.js') as typeof import('./s3.js');
  const sdkLog = logger.child({ component: 's3-sdk' });
  // The SDK logs every failed call as an error, also the answers we expect
  // and handle (NoSuchBucket before creating it, 501 from a store without
  // lifecycle rules, 404 on a HEAD): a call that fails the server is said by
  // our own line with its context (and counted), so the SDK's is debug.
  const store = new S3ObjectStore(
    { ...config.s3!, deadlines },
    { observe, log: { warn: (msg) => sdkLog.warn({ sdk: msg }, 'S3 SDK warning'), error: (msg) => sdkLog.debug({ sdk: msg }, 'S3 SDK error') } },
  );
  try {
    await store.ensureBucket();
    // Which backstops remove multipart uploads nobody finished (docs/s3.md).
    const expiry = await store.ensureUploadExpiry();
    const sweep = config.gcInterval > 0 ? `the sweep every ${config.gcInterval} s` : 'only `dropstream gc` (GC_INTERVAL is 0)';
    if (expiry.rule === 'none') {
      logger.info({ lifecycle_rule: 'none', reason: expiry.reason }, `incomplete multipart uploads: no bucket lifecycle rule (${expiry.reason}); ${sweep} aborts those unclaimed after GC_GRACE`);
    } else {
      logger.info({ lifecycle_rule: expiry.rule, days: expiry.days }, `incomplete multipart uploads: the bucket's lifecycle rule aborts them after ${expiry.days} days, and ${sweep} aborts those unclaimed after GC_GRACE`);
    }
    return { store, uploadLifetime: expiry.rule === 'none' ? undefined : expiry.days * 86_400 };
  } catch (err) {
    // A start that fails here leaves no sockets of the SDK behind.
    await store.close?.();
    throw err;
  }
}
