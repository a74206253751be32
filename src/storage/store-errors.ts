// What every object store shares with the parts it is built from: the errors
// a store call ends with and the byte range a read asks for. object-store.ts
// re-exports them for the rest of the service.

/** An inclusive byte range, as in an HTTP `Range` header. */
export interface ByteRange {
  start: number;
  end: number;
}

export class ObjectNotFoundError extends Error {
  readonly code = 'object_not_found';
  constructor(readonly key: string) {
    super(`object ${key} not found`);
    this.name = 'ObjectNotFoundError';
  }
}

/** The body is larger than the store can hold (or than 10,000 parts of the part size put() chose). */
export class ObjectTooLargeError extends Error {
  readonly code = 'object_too_large';
  constructor(readonly limit: number) {
    super(`the object store holds at most ${limit} bytes in one object`);
    this.name = 'ObjectTooLargeError';
  }
}

/** The store could not be reached or failed; the operation did nothing visible. */
export class ObjectStoreError extends Error {
  readonly code = 'store_unavailable';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ObjectStoreError';
  }
}

/**
 * A store call that did not finish within its deadline (store-deadlines.ts):
 * the store hangs. Like any store failure it answers 503 store_unavailable.
 */
export class StoreTimeoutError extends ObjectStoreError {
  constructor(
    readonly operation: string,
    readonly ms: number,
  ) {
    super(`the object store did not answer ${operation} within ${ms} ms`);
    this.name = 'StoreTimeoutError';
  }
}
