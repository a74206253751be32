// The driver's own view of s3rver: buckets, object sizes for checking what a
// party stored, and clean-up between runs (s3rver keeps every object on disk;
// a 5 GiB run needs ~10 GiB while it concatenates the parts).
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  S3Client,
} from '@aws-sdk/client-s3';
import { s3rverClientConfig } from './s3-config.js';

export class S3Admin {
  readonly client: S3Client;

  constructor(readonly endpoint: string) {
    this.client = new S3Client(s3rverClientConfig(endpoint));
  }

  async createBucket(bucket: string): Promise<void> {
    await this.client.send(new CreateBucketCommand({ Bucket: bucket })).catch((err: { name?: string }) => {
      if (err.name !== 'BucketAlreadyOwnedByYou' && err.name !== 'BucketAlreadyExists') throw err;
    });
  }

  /** Size of a stored object, or undefined when it is missing. */
  async size(bucket: string, key: string): Promise<number | undefined> {
    try {
      const res = await this.client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
      return res.ContentLength;
    } catch {
      return undefined;
    }
  }

  async delete(bucket: string, key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
  }

  /** Deletes every object of the bucket (tus leaves `<id>.info` objects too). */
  async empty(bucket: string): Promise<void> {
    for (;;) {
      const res = await this.client.send(new ListObjectsV2Command({ Bucket: bucket, MaxKeys: 1000 }));
      const keys = (res.Contents ?? []).map((o) => o.Key!);
      if (!keys.length) return;
      for (const key of keys) await this.delete(bucket, key);
    }
  }

  close(): void {
    this.client.destroy();
  }
}
