// What a store offers uploads that go straight to it (src/direct/): the
// service starts a multipart upload, signs each part's URL for the client,
// and at the end lists what the store holds and completes it. Only S3 has
// it, and only with S3_DIRECT_UPLOADS (the local store has no URLs to hand
// out). The abort is the store's discard(key, uploadId), as for every upload.

/** A part the store holds, as it lists it. */
export interface StoredPart {
  partNumber: number;
  size: number;
  etag: string;
}

export interface DirectStore {
  /** The store's bounds on parts (S3: 5 MiB to 5 GiB each but the last, 10,000 at most). */
  readonly limits: { minPartSize: number; maxPartSize: number; maxParts: number };
  /** Starts a multipart upload of `key`; resolves with its upload id. */
  start(key: string): Promise<string>;
  /**
   * A URL at which a client PUTs part `partNumber` of exactly `size` bytes
   * for `seconds`: the length is signed, so the store refuses another one.
   * Signing is local, no call to the store.
   */
  signPart(key: string, uploadId: string, partNumber: number, size: number, seconds: number): Promise<string>;
  /** Every part the store holds for the upload, in part order; rejects with UploadGoneError when the store knows no such upload. */
  parts(key: string, uploadId: string): Promise<StoredPart[]>;
  /** Makes the object of `parts` (as parts() listed them). */
  complete(key: string, uploadId: string, parts: readonly StoredPart[]): Promise<void>;
}

/** The store has no such multipart upload (aborted, completed, or expired by its lifecycle rule). */
export class UploadGoneError extends Error {
  constructor(key: string) {
    super(`the store has no open upload of ${key}`);
  }
}
