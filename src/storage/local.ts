import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { type FileHandle, open, opendir, readdir, stat, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  type ByteRange,
  type ObjectInfo,
  type ObjectPage,
  type ObjectStore,
  type StoredObject,
  type OpenUpload,
  type PutOptions,
  ObjectNotFoundError,
  ObjectStoreError,
  StoreTimeoutError,
} from './object-store.js';
import { appendAt, fileWriter, type Bounded } from './local-append.js';
import { mkdirDurable, renameDurable, syncDir, type Syncing } from './local-durable.js';
import { DEFAULT_DEADLINES, withDeadline, writeDeadline, type StoreCallObserver, type StoreDeadlines } from './store-deadlines.js';
import type { AppendOptions, AppendResult, ResumableState } from './resumable.js';

export interface LocalObjectStoreOptions {
  /**
   * Directory that holds the objects; created on first use. Uploads in progress
   * live in `<root>/.tmp`, on the same filesystem, so publishing one is an atomic rename.
   */
  root: string;
  /** Deadlines of its writes and syncs (store-deadlines.ts); DEFAULT_DEADLINES when absent. */
  deadlines?: StoreDeadlines;
  /** Told every bounded call's outcome (metrics, /readyz). */
  observe?: StoreCallObserver;
  /** Opens a resumable upload's file and the directories it syncs (fs/promises open unless given): tests give one whose writes or syncs hang. */
  openFile?: (path: string, flags: number, mode: number) => Promise<FileHandle>;
}

/** The store's upload ids (randomUUID), which are also the names of their temp files in `.tmp`. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Keeps each object as a plain file at `<root>/<key>`. */
export class LocalObjectStore implements ObjectStore {
  /** Whatever the filesystem holds; the number only has to be a safe integer. */
  readonly maxObjectSize = Number.MAX_SAFE_INTEGER;
  private readonly root: string;
  private readonly tmpDir: string;
  private ready: Promise<void> | undefined;

  private readonly bound: Bounded;
  /** The deadline and the open of the directory syncs (local-durable.ts). */
  private readonly syncing: Syncing;
  private readonly openFile: NonNullable<LocalObjectStoreOptions['openFile']>;
  /**
   * Resumable uploads' files whose append ended at a deadline while a write
   * was still in the kernel, until that write returns (a FileHandle's close
   * waits for it): no other append or completion may touch the file before,
   * or the late write could land on bytes written after it.
   */
  private readonly hung = new Map<string, Promise<void>>();

  constructor(options: LocalObjectStoreOptions) {
    this.root = options.root;
    const deadlines = options.deadlines ?? DEFAULT_DEADLINES;
    this.bound = (operation, bytes, work) => withDeadline(operation, writeDeadline(deadlines, bytes), work, options.observe).then(() => undefined);
    this.tmpDir = join(options.root, '.tmp');
    this.openFile = options.openFile ?? ((path, flags, mode) => open(path, flags, mode));
    this.syncing = { bound: this.bound, openFile: this.openFile };
  }

  async put(key: string, body: Readable, options: PutOptions = {}): Promise<ObjectInfo> {
    let target: string;
    let temp: { path: string; handle: FileHandle };
    try {
      target = this.pathOf(key);
      // The name is handed out before the file exists, so a record of it is
      // in place before there is anything to clean up.
      const name = randomUUID();
      await options.onStarted?.(name);
      temp = await this.createTemp(name);
    } catch (err) {
      // put owns the body either way; leaving it paused would stall the sender.
      body.destroy();
      throw err;
    }
    const out = fileWriter(temp.handle, this.bound);
    try {
      // pipeline rejects with the first error: the body's own when the body failed.
      await pipeline(body, out);
    } catch (err) {
      await unlink(temp.path).catch(() => undefined);
      throw err;
    }
    try {
      await renameDurable(temp.path, target, this.syncing);
    } catch (err) {
      await unlink(temp.path).catch(() => undefined);
      throw err instanceof ObjectStoreError ? err : new ObjectStoreError(`cannot store object ${key}`, { cause: err });
    }
    return { size: out.bytesWritten };
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const path = this.pathOf(key);
    // Open now so a missing object rejects here, rather than as a stream error
    // after the caller has already sent its response headers.
    let handle: FileHandle;
    try {
      handle = await open(path, 'r');
    } catch (err) {
      throw missing(err) ? new ObjectNotFoundError(key) : storeError(err, key);
    }
    // A fan-out directory opens fine on Linux, but it is not an object.
    const isFile = await handle.stat().then((s) => s.isFile(), () => false);
    if (!isFile) {
      await handle.close();
      throw new ObjectNotFoundError(key);
    }
    // The stream owns the handle from here and closes it on end or destroy.
    return handle.createReadStream(range ? { start: range.start, end: range.end } : {});
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    const path = this.pathOf(key);
    try {
      const info = await stat(path);
      return info.isFile() ? { size: info.size } : undefined;
    } catch (err) {
      if (missing(err)) return undefined;
      throw storeError(err, key);
    }
  }

  async delete(key: string): Promise<void> {
    const path = this.pathOf(key);
    // Empty fan-out directories stay on purpose: removing one could race a
    // concurrent put between its mkdir and its rename.
    await unlink(path).catch((err: unknown) => {
      if (!missing(err)) throw storeError(err, key);
    });
    // Its record goes once this resolves: a power cut must not bring back
    // an object nobody knows, and an unlink is durable once its directory
    // is. Synced even when the object was already gone: a retry (the
    // sweeper's) after a sync that failed finds it so, and must still make
    // that earlier unlink durable.
    await syncDir(dirname(path), this.syncing).catch((err: unknown) => (missing(err) ? undefined : Promise.reject(storeError(err, key))));
  }

  async discard(key: string, uploadId?: string): Promise<void> {
    if (uploadId !== undefined) await this.abortUpload({ uploadId });
    await this.delete(key);
  }

  /** Temp files in `.tmp`, aged by their last write (a put writes as the body flows). */
  async *openUploads({ pageSize = 1000 }: { pageSize?: number } = {}): AsyncIterable<OpenUpload[]> {
    const dir = await opendir(this.tmpDir).catch((err: unknown) => {
      if (missing(err)) return undefined;
      throw new ObjectStoreError(`cannot list ${this.tmpDir}`, { cause: err });
    });
    if (!dir) return;
    let page: OpenUpload[] = [];
    for await (const entry of dir) {
      if (!entry.isFile() || !UUID.test(entry.name)) continue;
      // Gone since it was listed: the put finished or failed meanwhile.
      const info = await stat(join(this.tmpDir, entry.name)).catch(() => undefined);
      if (info) page.push({ uploadId: entry.name, since: info.mtime });
      if (page.length === pageSize) {
        yield page;
        page = [];
      }
    }
    if (page.length) yield page;
  }

  /**
   * The objects under `root` (never `.tmp`), a fan-out directory at a time
   * in name order, aged by mtime (the last write before the rename that
   * published them). Keys are `<dir>/<name>` or a top-level name; deeper
   * files are not listed (the server writes none). Keys the server writes
   * (two hex digits, a slash, 32 hex digits) sort here as S3 sorts them.
   */
  async listObjects({ after, limit }: { after?: string; limit: number }): Promise<ObjectPage> {
    const fail = (err: unknown) => {
      if (missing(err)) return [];
      throw new ObjectStoreError(`cannot list ${this.root}`, { cause: err });
    };
    const top = (await readdir(this.root, { withFileTypes: true }).catch(fail)).filter((e) => e.name !== '.tmp').sort((a, b) => (a.name < b.name ? -1 : 1));
    const firstDir = after?.split('/')[0];
    const objects: StoredObject[] = [];
    for (const entry of top) {
      if (firstDir !== undefined && entry.name < firstDir) continue;
      let keys: string[] = [];
      if (entry.isFile()) keys = [entry.name];
      else if (entry.isDirectory()) {
        const inner = await readdir(join(this.root, entry.name), { withFileTypes: true }).catch(fail);
        keys = inner.filter((e) => e.isFile()).map((e) => `${entry.name}/${e.name}`).sort();
      }
      for (const key of keys) {
        if (after !== undefined && key <= after) continue;
        // Gone since it was listed (deleted meanwhile): not an object any more.
        const info = await stat(join(this.root, key)).catch(() => undefined);
        if (!info) continue;
        objects.push({ key, owner: key, size: info.size, modified: info.mtime });
        if (objects.length === limit) return { objects, next: key };
      }
    }
    return { objects };
  }

  async abortUpload({ uploadId }: Pick<OpenUpload, 'uploadId'>): Promise<void> {
    if (!UUID.test(uploadId)) throw new Error(`invalid upload id ${JSON.stringify(uploadId)}`);
    await unlink(join(this.tmpDir, uploadId)).catch((err: unknown) => {
      if (!missing(err)) throw new ObjectStoreError(`cannot remove temporary file ${uploadId}`, { cause: err });
    });
  }

  // Resumable uploads: a temp file in `.tmp` that each append writes at its
  // offset (local-append.ts), renamed into place when complete, as put()
  // does. Its name is the state's uploadId, so openUploads() lists it under
  // the id the caller records.

  async startResumable(): Promise<ResumableState> {
    return { uploadId: randomUUID() };
  }

  async appendResumable(key: string, state: ResumableState, body: AsyncIterable<Buffer>, options: AppendOptions): Promise<AppendResult> {
    this.pathOf(key);
    const path = this.resumablePath(state);
    this.refuseIfHung(path, key);
    await this.ensureTmpDir();
    let handle: FileHandle | undefined;
    try {
      handle = await this.openFile(path, constants.O_WRONLY | constants.O_CREAT, 0o600);
      const { size } = await handle.stat();
      if (size < options.offset) throw new Error(`the upload's file holds ${size} bytes, not ${options.offset}`);
      // Bytes past the offset are from an append whose state was never saved.
      if (size > options.offset) await handle.truncate(options.offset);
    } catch (err) {
      await handle?.close().catch(() => undefined);
      throw storeError(err, key);
    }
    let timedOut = false;
    try {
      const { offset, interrupted } = await appendAt(handle, body, options.offset, (err) => storeError(err, key), this.bound);
      // The file's name in .tmp must outlive a crash as its bytes do; it is new only in the first append.
      if (options.offset === 0) await syncDir(this.tmpDir, this.syncing).catch((err: unknown) => Promise.reject(storeError(err, key)));
      return { state, offset, interrupted };
    } catch (err) {
      timedOut = err instanceof StoreTimeoutError;
      throw err;
    } finally {
      const closed = handle.close().catch(() => undefined);
      if (timedOut) {
        // The write past its deadline may still be in the kernel, and the
        // close waits for it: answer now, and keep the file from other
        // appends until it returns.
        this.hung.set(path, closed);
        void closed.then(() => this.hung.delete(path));
      } else {
        await closed;
      }
    }
  }

  /** Refuses (store_unavailable) to touch a file whose earlier write has not returned. */
  private refuseIfHung(path: string, key: string): void {
    if (this.hung.has(path)) throw storeError(new Error('an earlier write to this upload has not returned from the disk'), key);
  }

  async completeResumable(key: string, state: ResumableState, offset: number): Promise<void> {
    const target = this.pathOf(key);
    const path = this.resumablePath(state);
    this.refuseIfHung(path, key);
    try {
      const size = await stat(path).then((s) => s.size, (err: unknown) => (missing(err) ? undefined : Promise.reject(err)));
      if (size === undefined) {
        // Completed before (a retry after the answer was lost): the object is
        // there, its name perhaps not yet durable when that answer was lost.
        if ((await this.head(key))?.size === offset) return await syncDir(dirname(target), this.syncing);
        if (offset > 0) throw new Error(`the upload's file is missing`);
        await this.ensureTmpDir();
        await (await open(path, 'wx', 0o600)).close();
      } else if (size !== offset) {
        throw new Error(`the upload's file holds ${size} bytes, not ${offset}`);
      }
      await renameDurable(path, target, this.syncing);
    } catch (err) {
      throw storeError(err, key);
    }
  }

  async discardResumable(key: string, state: ResumableState): Promise<void> {
    await this.discard(key, this.resumableName(state));
  }

  private resumableName(state: ResumableState): string {
    const name = state.uploadId;
    if (typeof name !== 'string' || !UUID.test(name)) throw new Error('not a local resumable state');
    return name;
  }

  private resumablePath(state: ResumableState): string {
    return join(this.tmpDir, this.resumableName(state));
  }

  private async ensureTmpDir(): Promise<void> {
    this.ready ??= mkdirDurable(this.tmpDir, this.syncing).then(
      () => undefined,
      (err: unknown) => {
        this.ready = undefined; // retry on the next put
        throw new ObjectStoreError(`cannot create ${this.tmpDir}`, { cause: err });
      },
    );
    await this.ready;
  }

  /**
   * Opens a fresh file in `.tmp` before any byte is piped, so a store that
   * cannot create files fails as an ObjectStoreError, never mixed up with the
   * body's errors that pipeline reports later.
   */
  private async createTemp(name: string): Promise<{ path: string; handle: FileHandle }> {
    await this.ensureTmpDir();
    const path = join(this.tmpDir, name);
    try {
      return { path, handle: await open(path, 'wx', 0o600) };
    } catch (err) {
      throw new ObjectStoreError('cannot create a temporary file', { cause: err });
    }
  }

  /** Keys come from the server, but a bad one must never reach outside `root` or into `.tmp`. */
  private pathOf(key: string): string {
    const bad = ['..', '\\', '\0'].some((s) => key.includes(s));
    if (bad || key === '' || key.startsWith('/') || key.split('/')[0] === '.tmp') {
      throw new Error(`invalid object key ${JSON.stringify(key)}`);
    }
    return join(this.root, key);
  }
}

/** ENOENT, or a path segment that is a file (ENOTDIR), or a key naming a directory (EISDIR). */
function missing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR';
}

/** `err` as an ObjectStoreError; one already (a StoreTimeoutError of a write or sync) keeps its kind. */
function storeError(err: unknown, key: string): ObjectStoreError {
  return err instanceof ObjectStoreError ? err : new ObjectStoreError(`local store failed on ${key}`, { cause: err });
}
