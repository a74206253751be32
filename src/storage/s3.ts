import { pipeline, Readable, Transform } from 'node:stream';
import { CreateBucketCommand, GetObjectCommand, ListMultipartUploadsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { StartupError } from '../startup-error.js';
import { ObjectNotFoundError, ObjectStoreError, type ByteRange, type ObjectInfo, type ObjectPage, type ObjectStore, type OpenUpload, type PutOptions } from './object-store.js';
import { describeS3Error } from './s3-errors.js';
import { s3Presigner, s3ReadSigner } from './s3-presign.js';
import { s3DirectStore } from './s3-direct.js';
import type { DirectStore } from './direct.js';
import { BufferShelf, openPooledRead, UnsupportedAnswer, StoreAnswerError, type PooledRead } from './pooled-read.js';
import { DeadlineHttpHandler } from './s3-handler.js';
import { DEFAULT_DEADLINES, idleTimed, type StoreCallObserver, type StoreDeadlines } from './store-deadlines.js';
import { ensureUploadExpiry, type UploadExpiry } from './s3-lifecycle.js';
import { abortParts, deleteObject, isMissing, objectSize, SharedPartBuffers } from './s3-parts.js';
import { S3_LIMITS, uploadStream } from './s3-upload.js';
import type { AppendOptions, AppendResult, ResumableState } from './resumable.js';
import { appendS3Resumable, completeS3Resumable, discardS3Resumable, startS3Resumable, uploadOfKey, type S3ResumableContext } from './s3-resumable.js';

export interface S3StoreOptions {
  /** Endpoint URL, e.g. http://minio:9000; absent for AWS itself. */
  endpoint?: string;
  bucket: string;
  region: string;
  /** Absent: the SDK's default credential chain (environment, instance role, ...). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
  /** Path-style URLs (bucket in the path), needed by MinIO and most S3-compatible stores. */
  forcePathStyle: boolean;
  /** Smallest part of a multipart upload, in bytes (5 MiB to 5 GiB, S3's limits). Larger files get larger parts. */
  partSize: number;
  /** Parts uploaded at once per upload, at most. */
  partsInFlight: number;
  /**
   * Part buffers beyond each upload's first, shared by all uploads
   * (SharedPartBuffers, s3-parts.ts). Absent: every upload makes its own,
   * up to partsInFlight.
   */
  sharedPartBuffers?: number;
  /** Days after which the bucket's lifecycle rule aborts incomplete uploads (ensureUploadExpiry); 0 sets no rule. */
  abortIncompleteDays?: number;
  /** Deadlines of its calls (store-deadlines.ts); DEFAULT_DEADLINES when absent. */
  deadlines?: StoreDeadlines;
  /** Present (S3_PRESIGNED_DOWNLOADS): the store can hand out download URLs (presignGet), signed for `publicEndpoint` (default: endpoint). */
  presign?: { publicEndpoint?: string };
  /** Present (S3_DIRECT_UPLOADS): clients may upload parts straight to the store (direct), through URLs signed for `publicEndpoint` (default: endpoint). */
  direct?: { publicEndpoint?: string };
  /**
   * Downloads (getPooled) read into reused buffers (pooled-read.ts), the GET
   * presigned by the SDK; false or absent: through GetObject. On by default
   * in the server (S3_POOLED_READS).
   */
  pooledReads?: boolean;
}

/** Read buffers one pooled download holds at most, of BufferShelf's 64 KiB: 512 KiB. */
const POOLED_BUFFERS = 8;

/** What the store reports to the server: every call's outcome, and the SDK's own warnings. */
export interface S3StoreHooks {
  observe?: StoreCallObserver;
  /** Where the SDK's warnings and errors go (the server's JSON log); without it they are dropped, never written to stderr. */
  log?: { warn(msg: unknown): void; error(msg: unknown): void };
}

/** Commands whose bodies are signed without hashing them (see the constructor). */
const UNSIGNED_PAYLOAD_COMMANDS = new Set(['UploadPartCommand', 'PutObjectCommand']);

/** Passes through only bytes start..end (inclusive) of a stream, then ends it. */
function sliceRange({ start, end }: ByteRange): Transform {
  let offset = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      const from = Math.max(start - offset, 0);
      const to = Math.min(end + 1 - offset, chunk.length);
      offset += chunk.length;
      if (from < to) this.push(chunk.subarray(from, to));
      if (offset > end) this.push(null);
      callback();
    },
  });
}

/** S3 and S3-compatible stores (MinIO). Uploads stream through fixed part buffers (s3-upload.ts). */
export class S3ObjectStore implements ObjectStore {
  readonly maxObjectSize = S3_LIMITS.maxObjectSize;
  readonly client: S3Client;
  readonly bucket: string;
  readonly presignGet?: ObjectStore['presignGet'];
  readonly direct?: DirectStore;

  private readonly deadlines: StoreDeadlines;
  /** Part buffers beyond each upload's first, lent to whichever upload is sending. */
  private readonly sharedBuffers: SharedPartBuffers | undefined;
  /** The pooled download path: its signer and the read buffers downloads borrow. */
  private readonly pooled: { sign: (key: string) => Promise<string>; shelf: BufferShelf } | undefined;
  /** For tests: hears every pooled download's pauses for want of a buffer. */
  onPooledPause?: (paused: boolean) => void;

  constructor(
    private readonly options: S3StoreOptions,
    private readonly hooks: S3StoreHooks = {},
  ) {
    this.bucket = options.bucket;
    this.deadlines = options.deadlines ?? DEFAULT_DEADLINES;
    if (options.presign) this.presignGet = s3Presigner({ ...options, publicEndpoint: options.presign.publicEndpoint ?? options.endpoint });
    if (options.pooledReads) this.pooled = { sign: s3ReadSigner(options), shelf: new BufferShelf() };
    if (options.sharedPartBuffers !== undefined) this.sharedBuffers = new SharedPartBuffers(options.partSize, options.sharedPartBuffers);
    // The SDK logs each call's input and output at info and its warnings to
    // the console when given no logger: keep only warnings and errors, in our log.
    const quiet = () => {};
    const logger = { trace: quiet, debug: quiet, info: quiet, warn: (msg: unknown) => hooks.log?.warn(msg), error: (msg: unknown) => hooks.log?.error(msg) };
    this.client = new S3Client({
      endpoint: options.endpoint,
      region: options.region,
      credentials: options.credentials,
      forcePathStyle: options.forcePathStyle,
      // Checksums of streamed bodies are sent aws-chunked, which some
      // S3-compatible stores save verbatim; we keep our own SHA-256 instead.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: 3,
      logger,
      requestHandler: new DeadlineHttpHandler({ connectionTimeout: 5_000, logger }, this.deadlines, hooks.observe, options.partSize),
    });
    if (options.direct) this.direct = s3DirectStore(this, { ...options, publicEndpoint: options.direct.publicEndpoint ?? options.endpoint });
    // Parts (and small objects) go out from buffers, which the SDK hashes
    // whole for the SigV4 signature: a second SHA-256 of every uploaded byte
    // (14% of the server's CPU during an upload, `npm run bench -- --profile`)
    // and 8 MiB hashed in one blocking call per part. Sign them UNSIGNED-PAYLOAD
    // instead, as the SDK does for every streamed body; the bytes are then
    // protected in transit by TCP, and by TLS with an https endpoint.
    this.client.middlewareStack.add(
      (next, context) => (args) => {
        const request = args.request as { headers?: Record<string, string> };
        if (UNSIGNED_PAYLOAD_COMMANDS.has(context.commandName ?? '') && request.headers) {
          request.headers['x-amz-content-sha256'] = 'UNSIGNED-PAYLOAD';
        }
        return next(args);
      },
      { step: 'build', name: 'dropstreamUnsignedPayload' },
    );
  }

  /**
   * Creates the bucket when it is missing. Fails with a StartupError naming
   * the cause ("403 SignatureDoesNotMatch"). The probe lists no keys
   * (MaxKeys 0) rather than HeadBucket, whose bodiless answer leaves the SDK
   * only the status; it needs the same permission (s3:ListBucket).
   */
  async ensureBucket(): Promise<void> {
    try {
      await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, MaxKeys: 0 }));
      return;
    } catch (err) {
      if (!isMissing(err)) throw this.startupError('cannot reach bucket', err);
    }
    try {
      await this.client.send(new CreateBucketCommand({ Bucket: this.bucket }));
    } catch (err) {
      throw this.startupError('bucket is missing and could not be created', err);
    }
  }

  private startupError(what: string, err: unknown): StartupError {
    return new StartupError(`S3 ${what}: ${this.bucket} at ${this.options.endpoint ?? 'AWS'}: ${describeS3Error(err)}`, { cause: err });
  }

  /** Sets the bucket's lifecycle rule for incomplete uploads where the store and the credentials allow it (s3-lifecycle.ts). */
  ensureUploadExpiry(): Promise<UploadExpiry> {
    return ensureUploadExpiry(this.client, this.bucket, this.options.abortIncompleteDays ?? 0);
  }

  /**
   * Part size for a file of at most `maxSize` bytes: the configured size, or
   * larger so the file fits in 10,000 parts, never over S3's 5 GiB. Each
   * upload holds up to partsInFlight buffers of it: a plan of 1 TiB means
   * 105 MiB parts.
   */
  partSizeFor(maxSize = 0): number {
    const fitting = Math.ceil(Math.min(maxSize, S3_LIMITS.maxObjectSize) / S3_LIMITS.maxParts);
    return Math.min(Math.max(this.options.partSize, fitting), S3_LIMITS.maxPartSize);
  }

  put(key: string, body: Readable, options: PutOptions = {}): Promise<ObjectInfo> {
    return uploadStream({
      client: this.client,
      bucket: this.bucket,
      key,
      body,
      partSize: this.partSizeFor(options.maxSize),
      partsInFlight: this.options.partsInFlight,
      shared: this.sharedBuffers,
      onMultipartStart: options.onStarted,
    });
  }

  async discard(key: string, uploadId?: string): Promise<void> {
    if (uploadId) await this.abortUpload({ key, uploadId });
    await this.delete(key);
  }

  async abortUpload({ key, uploadId }: Pick<OpenUpload, 'key' | 'uploadId'>): Promise<void> {
    if (key === undefined) throw new Error('an S3 multipart upload is aborted by key and upload id');
    await abortParts(this, key, uploadId);
  }

  /**
   * ListMultipartUploads, page by page (S3 answers at most 1,000 at once).
   * MinIO lists only the uploads of one exact key, so there this finds
   * nothing; MinIO expires stale uploads itself instead.
   */
  async *openUploads({ pageSize = 1000 }: { pageSize?: number } = {}): AsyncIterable<OpenUpload[]> {
    let KeyMarker: string | undefined;
    let UploadIdMarker: string | undefined;
    do {
      const res = await this.client
        .send(new ListMultipartUploadsCommand({ Bucket: this.bucket, MaxUploads: pageSize, KeyMarker, UploadIdMarker }))
        .catch((err: unknown) => {
          throw new ObjectStoreError('listing multipart uploads failed', { cause: err });
        });
      // A store that does not say when an upload started has it treated as just started: never old enough to abort.
      const page = (res.Uploads ?? []).map((u) => ({ key: u.Key!, uploadId: u.UploadId!, since: u.Initiated ?? new Date() }));
      if (page.length) yield page;
      const more = res.IsTruncated && (res.NextKeyMarker !== KeyMarker || res.NextUploadIdMarker !== UploadIdMarker);
      KeyMarker = more ? res.NextKeyMarker : undefined;
      UploadIdMarker = more ? res.NextUploadIdMarker : undefined;
    } while (KeyMarker !== undefined);
  }

  /**
   * ListObjectsV2 from after `after` (StartAfter: a key, not the store's
   * opaque token, so any instance can continue a walk another began). At
   * most 1,000 a call, as S3 answers.
   */
  async listObjects({ after, limit }: { after?: string; limit: number }): Promise<ObjectPage> {
    const res = await this.client
      .send(new ListObjectsV2Command({ Bucket: this.bucket, StartAfter: after, MaxKeys: Math.min(limit, 1000) }))
      .catch((err: unknown) => {
        throw new ObjectStoreError('listing objects failed', { cause: err });
      });
    // A store that does not say when an object was written has it treated as just written: never old enough to remove.
    const objects = (res.Contents ?? []).map((o) => ({ key: o.Key!, owner: uploadOfKey(o.Key!), size: o.Size ?? 0, modified: o.LastModified ?? new Date() }));
    const last = objects.at(-1)?.key;
    return res.IsTruncated && last !== undefined ? { objects, next: last } : { objects };
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    try {
      const res = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: range ? `bytes=${range.start}-${range.end}` : undefined }),
      );
      // The SDK's own stream, watched for silence: wrapping it in an async
      // generator (idleBounded) cost a promise, a timer and a Readable.from
      // hop per chunk (see docs/performance.md, downloads).
      const body = idleTimed(res.Body as Readable, 'get_object', this.deadlines.readIdleMs, this.hooks.observe);
      if (!range) return body;
      // A server may send more than asked (HTTP lets it ignore Range; s3rver
      // answers bytes=0-0 with the whole object): cut the range out ourselves.
      const served = /^bytes (\d+)-(\d+)\//.exec(res.ContentRange ?? '');
      const servedStart = served ? Number(served[1]) : 0;
      const servedEnd = served ? Number(served[2]) : Number.POSITIVE_INFINITY;
      if (servedStart === range.start && servedEnd === range.end) return body;
      return pipeline(body, sliceRange({ start: range.start - servedStart, end: range.end - servedStart }), () => {});
    } catch (err) {
      if (isMissing(err)) throw new ObjectNotFoundError(key);
      throw new ObjectStoreError('reading from the object store failed', { cause: err });
    }
  }

  /**
   * A download's bytes: read into reused buffers (pooled-read.ts) when
   * pooledReads is on, else get()'s stream. An answer the pooled reader does
   * not take (a chunked body, say) is read again through get().
   */
  async getPooled(key: string, range?: ByteRange): Promise<Readable | PooledRead> {
    if (!this.pooled) return this.get(key, range);
    try {
      return await openPooledRead({
        url: new URL(await this.pooled.sign(key)),
        range,
        shelf: this.pooled.shelf,
        buffers: POOLED_BUFFERS,
        headMs: this.deadlines.callMs,
        idleMs: this.deadlines.readIdleMs,
        observe: this.hooks.observe,
        onPause: this.onPooledPause,
      });
    } catch (err) {
      if (err instanceof UnsupportedAnswer) {
        this.hooks.log?.warn(`pooled read of ${key} fell back to GetObject: ${err.message}`);
        return this.get(key, range);
      }
      if (err instanceof StoreAnswerError && (err.status === 404 || err.code === 'NoSuchKey')) throw new ObjectNotFoundError(key);
      if (err instanceof ObjectStoreError) throw err;
      throw new ObjectStoreError('reading from the object store failed', { cause: err });
    }
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    const size = await objectSize(this, key);
    return size === undefined ? undefined : { size };
  }

  async delete(key: string): Promise<void> {
    await deleteObject(this, key);
  }

  // Resumable uploads: see s3-resumable.ts.

  private get resumable(): S3ResumableContext {
    return { client: this.client, bucket: this.bucket, partsInFlight: this.options.partsInFlight, shared: this.sharedBuffers, readIdleMs: this.deadlines.readIdleMs, observe: this.hooks.observe };
  }

  async startResumable(_key: string, options: { maxSize: number }): Promise<ResumableState> {
    return startS3Resumable(this.partSizeFor(options.maxSize));
  }

  appendResumable(key: string, state: ResumableState, body: AsyncIterable<Buffer>, options: AppendOptions): Promise<AppendResult> {
    return appendS3Resumable(this.resumable, key, state, body, options);
  }

  completeResumable(key: string, state: ResumableState, offset: number): Promise<void> {
    return completeS3Resumable(this.resumable, key, state, offset);
  }

  discardResumable(key: string, state: ResumableState): Promise<void> {
    return discardS3Resumable(this.resumable, key, state);
  }

  async close(): Promise<void> {
    this.client.destroy();
  }
}
