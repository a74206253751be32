// The local store's writes have deadlines too (STORE_CALL_TIMEOUT +
// bytes / STORE_MIN_RATE per write and fsync, as an S3 part): a disk that
// hangs (a stale NFS mount) fails the call at its deadline (503
// store_unavailable, as the S3 faults show over HTTP). The hang of the
// resumable append is real, in the kernel: the upload's temp file is a FIFO
// whose reader never reads, so a write blocks once the pipe's buffer is full,
// as a write to a hung mount does. The filesystem call itself cannot be
// cancelled: it holds one of libuv's threads, and the file's handle cannot
// close, until the kernel returns (here, when the test closes the reader).
// A plain upload's temp file is made by the store itself, so its writer is
// driven with a handle that never answers, as is the final fsync.
import { execFileSync } from 'node:child_process';
import { constants, closeSync, openSync } from 'node:fs';
import { mkdir, mkdtemp, open, rm, unlink, writeFile, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { expect } from 'chai';
import { LocalObjectStore } from '../../src/storage/local.js';
import { appendAt, fileWriter } from '../../src/storage/local-append.js';
import { ObjectStoreError, StoreTimeoutError } from '../../src/storage/object-store.js';
import { withDeadline, writeDeadline } from '../../src/storage/store-deadlines.js';
import { sleep } from '../helpers/raw-upload.js';

const MiB = 1024 * 1024;

describe('faults: the local disk hangs a write', function () {
  this.timeout(30_000);
  let root: string;
  let fifo = '';
  let store: LocalObjectStore;

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'dropstream-hang-'));
    store = new LocalObjectStore({
      root,
      deadlines: { callMs: 500, minRate: 16 * MiB, readIdleMs: 1000 },
      observe: (operation, outcome) => outcomes.push(`${operation} ${outcome}`),
      // A FIFO refuses a write at a position (ESPIPE): its handle writes where it is, and truncates nothing.
      openFile: async (path, flags, mode) => {
        const handle = await open(path, flags, mode);
        if (path !== fifo) return handle;
        return new Proxy(handle, {
          get(target, prop) {
            if (prop === 'writev') return (buffers: Buffer[]) => target.writev(buffers);
            if (prop === 'truncate') return async () => {};
            const value: unknown = Reflect.get(target, prop, target);
            return typeof value === 'function' ? value.bind(target) : value;
          },
        });
      },
    });
  });
  after(() => rm(root, { recursive: true, force: true }));
  const outcomes: string[] = [];
  const body = (bytes: number, fill: number) => (async function* () {
    yield Buffer.alloc(bytes, fill);
  })();

  it('when a resumable append meets a write that hangs, then it fails with StoreTimeoutError at its deadline, the file is refused to other appends until the write returns, and then the upload goes on', async () => {
    const state = await store.startResumable();
    await mkdir(join(root, '.tmp'), { recursive: true });
    fifo = join(root, '.tmp', state.uploadId as string);
    execFileSync('mkfifo', [fifo]);
    // A reader that never reads: a write blocks once the pipe's 64 KiB are full, as on a hung mount.
    const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    let readerOpen = true;
    const letGo = () => {
      if (readerOpen) closeSync(reader);
      readerOpen = false;
    };
    // Should the append wait for the kernel, the test fails on its time below instead of hanging.
    const safety = setTimeout(letGo, 5000);
    try {
      const started = Date.now();
      const err = await store.appendResumable('hang/a', state, body(MiB, 1), { offset: 0 }).catch((e: unknown) => e);
      const ms = Date.now() - started;
      expect(err).to.be.instanceOf(StoreTimeoutError);
      expect((err as StoreTimeoutError).operation).to.equal('write');
      expect(outcomes).to.include('write timeout');
      // The deadline is 500 ms + 1 MiB at 16 MiB/s.
      expect(ms).to.be.within(500, 3000);

      // The write is still in the kernel: the file is refused at once, not written beside it.
      const again = Date.now();
      const refused = await store.appendResumable('hang/a', state, body(MiB, 2), { offset: 0 }).catch((e: unknown) => e);
      expect(refused).to.be.instanceOf(ObjectStoreError);
      expect(refused).to.not.be.instanceOf(StoreTimeoutError);
      expect(Date.now() - again).to.be.below(400);
      const completing = await store.completeResumable('hang/a', state, 0).catch((e: unknown) => e);
      expect(completing).to.be.instanceOf(ObjectStoreError);

      // The disk answers (the hung write fails: no reader); the FIFO makes way for a file.
      letGo();
      await unlink(fifo);
      let appended: unknown;
      for (const until = Date.now() + 2000; Date.now() < until; await sleep(50)) {
        appended = await store.appendResumable('hang/a', state, body(MiB, 3), { offset: 0, length: MiB }).catch((e: unknown) => e);
        if (!(appended instanceof Error)) break;
      }
      expect(appended).to.deep.include({ offset: MiB });
      await store.completeResumable('hang/a', state, MiB);
      const stored = Buffer.concat(await (await store.get('hang/a')).toArray());
      expect(stored.equals(Buffer.alloc(MiB, 3))).to.equal(true);
    } finally {
      clearTimeout(safety);
      letGo();
    }
  });
});

describe('the local store: writes and fsyncs that never answer', () => {
  const deadlines = { callMs: 200, minRate: 64 * MiB, readIdleMs: 1000 };
  const bound = (operation: string, bytes: number, work: () => Promise<unknown>) =>
    withDeadline(operation, writeDeadline(deadlines, bytes), work).then(() => undefined);
  const never = () => new Promise<never>(() => {});

  it('when a plain upload write never returns, then the writer fails with StoreTimeoutError("write") at its deadline and closes its handle', async () => {
    let closed = false;
    const handle = { writev: never, close: async () => void (closed = true) } as unknown as FileHandle;
    const started = Date.now();
    const err = await pipeline(Readable.from([Buffer.alloc(64 * 1024)]), fileWriter(handle, bound)).catch((e: unknown) => e);
    const ms = Date.now() - started;
    expect(err).to.be.instanceOf(StoreTimeoutError);
    expect(err).to.be.instanceOf(ObjectStoreError);
    expect((err as Error).message).to.include('write');
    // 200 ms + 64 KiB at 64 MiB/s.
    expect(ms).to.be.within(195, 2000);
    expect(closed).to.equal(true);
  });

  it('when the fdatasync that ends a plain upload never returns, then the writer fails with StoreTimeoutError("fsync") at its deadline, sized to the whole file, and closes its handle', async () => {
    let closed = false;
    const handle = {
      writev: async (buffers: Buffer[]) => ({ bytesWritten: buffers.reduce((n, b) => n + b.length, 0) }),
      datasync: never,
      close: async () => void (closed = true),
    } as unknown as FileHandle;
    const started = Date.now();
    const err = await pipeline(Readable.from([Buffer.alloc(16 * MiB)]), fileWriter(handle, bound)).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(StoreTimeoutError);
    expect((err as Error).message).to.include('fsync');
    // 200 ms + 16 MiB at 64 MiB/s.
    expect(Date.now() - started).to.be.within(445, 2000);
    expect(closed).to.equal(true);
  });

  describe('when the fsync of a directory never returns', () => {
    let dir: string;
    let hanging: LocalObjectStore;
    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), 'dropstream-dirsync-'));
      await mkdir(join(dir, '.tmp'));
      await mkdir(join(dir, 'ab'));
      hanging = new LocalObjectStore({
        root: dir,
        deadlines,
        // A directory's handle whose fsync never answers, as on a hung mount; files are opened as they are.
        openFile: async (path, flags, mode) => {
          const handle = await open(path, flags, mode);
          if (!(flags & constants.O_DIRECTORY)) return handle;
          return new Proxy(handle, {
            get(target, prop) {
              if (prop === 'sync') return never;
              const value: unknown = Reflect.get(target, prop, target);
              return typeof value === 'function' ? value.bind(target) : value;
            },
          });
        },
      });
    });
    afterEach(() => rm(dir, { recursive: true, force: true }));

    it('then a put fails with StoreTimeoutError("fsync") at the call deadline once its file is renamed', async () => {
      const started = Date.now();
      const err = await hanging.put('ab/object', Readable.from([Buffer.alloc(1000)])).catch((e: unknown) => e);
      expect(err).to.be.instanceOf(StoreTimeoutError);
      expect((err as Error).message).to.include('fsync');
      // The file's fdatasync is quick; the directory's fsync is a call: 200 ms.
      expect(Date.now() - started).to.be.within(195, 2000);
    });

    it('then a delete fails with StoreTimeoutError("fsync") at the call deadline, so its record stays', async () => {
      await writeFile(join(dir, 'ab', 'gone'), 'x');
      const started = Date.now();
      const err = await hanging.delete('ab/gone').catch((e: unknown) => e);
      expect(err).to.be.instanceOf(StoreTimeoutError);
      expect((err as Error).message).to.include('fsync');
      expect(Date.now() - started).to.be.within(195, 2000);
    });
  });

  it('when the fsync that ends a resumable append never returns, then the append fails with StoreTimeoutError("fsync") at its deadline', async () => {
    const handle = {
      writev: async (buffers: Buffer[]) => ({ bytesWritten: buffers.reduce((n, b) => n + b.length, 0) }),
      datasync: never,
    } as unknown as FileHandle;
    const started = Date.now();
    const err = await appendAt(handle, Readable.from([Buffer.alloc(1000)]), 0, (e) => new ObjectStoreError('local store failed', { cause: e }), bound).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(StoreTimeoutError);
    expect((err as Error).message).to.include('fsync');
    // 200 ms + 8 MiB (what a sync is sized for) at 64 MiB/s.
    expect(Date.now() - started).to.be.within(320, 2000);
  });
});
