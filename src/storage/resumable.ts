// The resumable half of ObjectStore: an object written by several requests
// (tus PATCHes), possibly on several instances, with nothing kept in any
// process between them. What a store needs to continue is its state: a small
// JSON value the caller saves (in the database) after every append, and
// hands back for the next one. Bytes a request wrote that the caller never
// saved a state for are invisible: the next append from the saved state
// writes over them, and discardResumable() removes them.
type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** What a store keeps of a resumable upload between requests. Opaque to callers, except `uploadId`. */
export interface ResumableState {
  /**
   * The store's handle on the incomplete upload (a temp file name, a
   * multipart upload id), as put() passes to onStarted; absent while the
   * store has none. Record it where the sweeper looks (pending_objects), so
   * the upload counts as claimed.
   */
  readonly uploadId?: string;
  readonly [field: string]: Json | undefined;
}

export interface AppendOptions {
  /** Bytes stored so far: the offset of the state's last append. The body continues there. */
  offset: number;
  /** The upload's total size, when known: a body that reaches it ends the upload, so the store may write a short last part. */
  length?: number;
  /**
   * Called, and awaited, when the state changes mid-append in a way the
   * caller must save even if the process dies before the append ends: a new
   * incomplete upload (its `uploadId`) that would otherwise be left unknown.
   */
  onState?: (state: ResumableState) => Promise<void>;
}

export interface AppendResult {
  state: ResumableState;
  /** Bytes stored now, in all: `offset` plus what the body delivered. */
  offset: number;
  /**
   * Present when the body failed or was destroyed before its end (a cut
   * connection, a limit): its error. Everything the body delivered before
   * that is stored, and `offset` counts it.
   */
  interrupted?: unknown;
}

/**
 * Resumable uploads. An upload is started, appended to any number of times
 * (each append continues at the offset of the state it is given), completed
 * once its last byte is in (the object then appears under its key, exactly
 * as put() would leave it), or discarded.
 */
export interface ResumableStore {
  /** A new upload to `key` of at most `maxSize` bytes (it sizes the store's parts). Nothing is written yet. */
  startResumable(key: string, options: { maxSize: number }): Promise<ResumableState>;

  /**
   * Appends `body` at `options.offset`, holding at most what put() holds in
   * memory. The body is read with for-await and nothing sits between it and
   * the store, so a caller that counts (or hashes) the chunks it yields
   * counts exactly what the store received. Resolves once everything the body delivered is durably stored,
   * also when the body fails midway (see AppendResult.interrupted): a client
   * loses nothing that reached us. Rejects with ObjectStoreError if the store
   * fails; the state given stays valid, and the next append from it
   * continues as if this one had not happened.
   */
  appendResumable(key: string, state: ResumableState, body: AsyncIterable<Buffer>, options: AppendOptions): Promise<AppendResult>;

  /**
   * Makes the object readable under `key`, once `offset` is the upload's
   * length. Safe to repeat: a completion that already happened is success.
   */
  completeResumable(key: string, state: ResumableState, offset: number): Promise<void>;

  /** Removes everything the upload wrote (and the object, if completed). Nothing left is not an error. */
  discardResumable(key: string, state: ResumableState): Promise<void>;
}
