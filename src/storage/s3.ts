import { pipeline, Transform, type Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { uploadStream } from './s3-upload.js';
import { ObjectNotFoundError, ObjectStoreError, type ByteRange, type ObjectInfo, type ObjectStore, type PutOptions } from './object-store.js';

export interface S3StoreOptions {
  /** Endpoint URL, e.g. http://minio:9000; absent for AWS itself. */
  endpoint?: string;
  bucket: string;
  region: string;
  /** Absent: the SDK's default credential chain (environment, instance role, ...). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
  /** Path-style URLs (bucket in the path), needed by MinIO and most S3-compatible stores. */
  forcePathStyle: boolean;
  /** Smallest part of a multipart upload, in bytes (at least 5 MiB, S3's minimum). Larger files get larger parts. */
  partSize: number;
  /** Parts uploaded at once per upload. Each upload holds exactly (partsInFlight + 1) part buffers. */
  partsInFlight: number;
}

/** Commands whose bodies are signed without hashing them (see the constructor). */
const UNSIGNED_PAYLOAD_COMMANDS = new Set(['UploadPartCommand', 'PutObjectCommand']);

/** S3 allows at most this many parts in one multipart upload. */
const MAX_PARTS = 10_000;

const isNotFound = (err: unknown) =>
  err instanceof S3ServiceException && (err.name === 'NoSuchKey' || err.name === 'NotFound' || err.$metadata.httpStatusCode === 404);

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
  readonly client: S3Client;
  private readonly bucket: string;

  constructor(private readonly options: S3StoreOptions) {
    this.bucket = options.bucket;
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
      requestHandler: new NodeHttpHandler({ connectionTimeout: 5_000, requestTimeout: 60_000 }),
    });
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

  /** Creates the bucket when it is missing; fails with a message an operator can act on. */
  async ensureBucket(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
      return;
    } catch (err) {
      if (!isNotFound(err)) throw this.startupError('cannot reach bucket', err);
    }
    try {
      await this.client.send(new CreateBucketCommand({ Bucket: this.bucket }));
    } catch (err) {
      throw this.startupError('bucket is missing and could not be created', err);
    }
  }

  private startupError(what: string, err: unknown): Error {
    const detail = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    return new Error(`S3 ${what}: ${this.bucket} at ${this.options.endpoint ?? 'AWS'} (${detail})`);
  }

  /** Part size for a file of at most `maxSize` bytes: the configured size, or larger so it fits in 10,000 parts. */
  partSizeFor(maxSize = 0): number {
    return Math.max(this.options.partSize, Math.ceil(maxSize / MAX_PARTS));
  }

  put(key: string, body: Readable, options: PutOptions = {}): Promise<ObjectInfo> {
    return uploadStream({
      client: this.client,
      bucket: this.bucket,
      key,
      body,
      partSize: this.partSizeFor(options.maxSize),
      partsInFlight: this.options.partsInFlight,
      onMultipartStart: options.onStarted,
    });
  }

  async discard(key: string, uploadId?: string): Promise<void> {
    if (uploadId) {
      try {
        await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId }));
      } catch (err) {
        if (!(err instanceof S3ServiceException && (err.name === 'NoSuchUpload' || err.$metadata.httpStatusCode === 404))) {
          throw new ObjectStoreError('aborting a multipart upload failed', { cause: err });
        }
      }
    }
    await this.delete(key);
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    try {
      const res = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: range ? `bytes=${range.start}-${range.end}` : undefined }),
      );
      const body = res.Body as Readable;
      if (!range) return body;
      // A server may send more than asked (HTTP lets it ignore Range; s3rver
      // answers bytes=0-0 with the whole object): cut the range out ourselves.
      const served = /^bytes (\d+)-(\d+)\//.exec(res.ContentRange ?? '');
      const servedStart = served ? Number(served[1]) : 0;
      const servedEnd = served ? Number(served[2]) : Number.POSITIVE_INFINITY;
      if (servedStart === range.start && servedEnd === range.end) return body;
      return pipeline(body, sliceRange({ start: range.start - servedStart, end: range.end - servedStart }), () => {});
    } catch (err) {
      if (isNotFound(err)) throw new ObjectNotFoundError(key);
      throw new ObjectStoreError('reading from the object store failed', { cause: err });
    }
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    try {
      const res = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { size: res.ContentLength ?? 0 };
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new ObjectStoreError('reading from the object store failed', { cause: err });
    }
  }

  async delete(key: string): Promise<void> {
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (err) {
      if (isNotFound(err)) return;
      throw new ObjectStoreError('deleting from the object store failed', { cause: err });
    }
  }

  /** Multipart uploads started and neither completed nor aborted: what a crash or a failed abort leaves behind. */
  async openUploads(): Promise<{ key: string; uploadId: string; initiated?: Date }[]> {
    const res = await this.client.send(new ListMultipartUploadsCommand({ Bucket: this.bucket }));
    return (res.Uploads ?? []).map((u) => ({ key: u.Key!, uploadId: u.UploadId!, initiated: u.Initiated }));
  }

  async close(): Promise<void> {
    this.client.destroy();
  }
}
