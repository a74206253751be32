// What a power cut keeps of the local store is decided in the kernel, so
// these tests watch the system calls themselves (strace on a child process
// that uses the real store on the real filesystem) rather than a spy on
// Node's FileHandle: a sync that the store asks for but the kernel never
// sees (a wrong handle, a call not awaited) fails them too. A file row is
// committed once the store answers, so by then the file's bytes and every
// new directory entry leading to it must be synced.
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { envWithoutConfig } from '../helpers/run-to-exit.js';
import { itWithStrace, traceNode, type Syscall } from '../helpers/strace.js';

const SYSCALLS = ['fdatasync', 'fsync', 'rename', 'renameat', 'renameat2', 'unlink', 'unlinkat'];

describe('LocalObjectStore: durable before it answers (strace)', function () {
  this.timeout(60_000);
  let dir: string;
  let root: string;
  let markers: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dropstream-durable-'));
    root = join(dir, 'store');
    markers = join(dir, 'markers');
    await mkdir(markers);
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  async function trace(scenario: 'put' | 'resumable' | 'delete' | 'delete-again'): Promise<Syscall[]> {
    const { calls, run } = await traceNode(
      ['--import', 'tsx', 'test/contract/local-durability.child.ts', JSON.stringify({ root, markers, scenario })],
      SYSCALLS,
      envWithoutConfig(),
      join(dir, 'trace'),
    );
    expect(run.code, `strace or the child failed: ${run.stderr}`).to.equal(0);
    return calls;
  }
  /** The first successful call of `name` (or of any rename) whose arguments end with `path` (strace's `<path>` after an fd). */
  const find = (calls: Syscall[], name: string, test: (args: string) => boolean): Syscall => {
    const call = calls.find((c) => (name === 'rename' ? c.name.startsWith('rename') : c.name === name) && c.result === 0 && test(c.args));
    expect(call, `no ${name} matching in:\n${calls.map((c) => `${c.name}(${c.args}) = ${c.result}`).join('\n')}`).to.not.equal(undefined);
    return call!;
  };
  const onFd = (path: string) => (args: string) => args.endsWith(`<${path}>`);

  itWithStrace('when put resolves, then the temp file was fdatasynced before its rename, and every directory given a new entry was fsynced after it', async () => {
    const calls = await trace('put');
    const answered = find(calls, 'fsync', onFd(join(markers, 'put-answered')));
    const rename = find(calls, 'rename', (args) => args.includes(`${root}/.tmp/`) && args.includes(`"${root}/ab/cd/object"`));
    const datasync = find(calls, 'fdatasync', (args) => args.includes(`<${root}/.tmp/`));
    expect(datasync.end).to.be.below(rename.start);
    // The object's entry is in ab/cd; ab/cd's in ab and ab's in the root, both made by this put.
    for (const dir of [`${root}/ab/cd`, `${root}/ab`, root]) {
      const sync = calls.find((c) => c.name === 'fsync' && c.result === 0 && c.args.endsWith(`<${dir}>`) && c.start > rename.end);
      expect(sync, `no fsync of ${dir} after the rename`).to.not.equal(undefined);
      expect(sync!.end).to.be.below(answered.start);
    }
  });

  itWithStrace('when a resumable upload appends and completes, then its file and its name in .tmp are synced before the append answers, and the object\'s directory after the rename before completion answers', async () => {
    const calls = await trace('resumable');
    const appended = find(calls, 'fsync', onFd(join(markers, 'append-answered')));
    const completed = find(calls, 'fsync', onFd(join(markers, 'complete-answered')));
    const datasync = find(calls, 'fdatasync', (args) => args.includes(`<${root}/.tmp/`));
    const tmpSync = find(calls, 'fsync', onFd(`${root}/.tmp`));
    expect(datasync.end).to.be.below(appended.start);
    expect(tmpSync.end).to.be.below(appended.start);
    const rename = find(calls, 'rename', (args) => args.includes(`${root}/.tmp/`) && args.includes(`"${root}/ef/gh/object"`));
    expect(rename.start).to.be.above(appended.end);
    const dirSync = calls.find((c) => c.name === 'fsync' && c.result === 0 && c.args.endsWith(`<${root}/ef/gh>`) && c.start > rename.end);
    expect(dirSync, 'no fsync of the object\'s directory after the rename').to.not.equal(undefined);
    expect(dirSync!.end).to.be.below(completed.start);
  });

  itWithStrace('when delete resolves, then the directory that held the object was fsynced after the unlink', async () => {
    const calls = await trace('delete');
    const put = find(calls, 'fsync', onFd(join(markers, 'put-answered')));
    const deleted = find(calls, 'fsync', onFd(join(markers, 'delete-answered')));
    const unlink = calls.find((c) => c.name.startsWith('unlink') && c.result === 0 && c.args.includes(`"${root}/ab/cd/object"`) && c.start > put.end);
    expect(unlink, 'no unlink of the object').to.not.equal(undefined);
    const sync = calls.find((c) => c.name === 'fsync' && c.result === 0 && c.args.endsWith(`<${root}/ab/cd>`) && c.start > unlink!.end);
    expect(sync, 'no fsync of the object\'s directory after the unlink').to.not.equal(undefined);
    expect(sync!.end).to.be.below(deleted.start);
  });

  itWithStrace('when a delete is retried after its object was already unlinked (an earlier sync failed), then the directory is still fsynced before it answers', async () => {
    const calls = await trace('delete-again');
    const unlinked = find(calls, 'fsync', onFd(join(markers, 'unlinked')));
    const deleted = find(calls, 'fsync', onFd(join(markers, 'delete-answered')));
    const sync = calls.find((c) => c.name === 'fsync' && c.result === 0 && c.args.endsWith(`<${root}/ab/cd>`) && c.start > unlinked.end);
    expect(sync, 'an fsync of the directory after the retry began').to.not.equal(undefined);
    expect(sync!.end).to.be.below(deleted.start);
  });
});
