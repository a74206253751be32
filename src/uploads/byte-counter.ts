import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';

/**
 * Passes bytes through while counting and hashing them, and fails the stream
 * the moment the count passes `limit`, so an oversized upload is refused
 * after at most one chunk more than the limit, not after the whole body.
 */
export class ByteCounter extends Transform {
  bytes = 0;
  private readonly hash = createHash('sha256');

  constructor(
    private readonly limit: number,
    private readonly overLimit: () => Error,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.limit) return callback(this.overLimit());
    this.hash.update(chunk);
    callback(null, chunk);
  }

  /** Hex SHA-256 of everything passed through; call once, after the end. */
  sha256(): string {
    return this.hash.digest('hex');
  }
}
