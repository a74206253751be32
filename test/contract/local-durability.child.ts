// Run under strace by local-durability.test.ts: one put, one put and its
// delete, a delete retried after its object was unlinked, or one resumable upload (an append, then its completion), into a
// local store at `root`.
// After each step resolves it fsyncs a marker file named for the step, so
// the trace shows which syncs came before the store answered.
import { closeSync, fsyncSync, openSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { LocalObjectStore } from '../../src/storage/local.js';

const { root, markers, scenario } = JSON.parse(process.argv[2]!) as { root: string; markers: string; scenario: 'put' | 'resumable' | 'delete' | 'delete-again' };
const MiB = 1024 * 1024;
const store = new LocalObjectStore({ root });

function answered(step: string): void {
  const fd = openSync(join(markers, step), 'w');
  fsyncSync(fd);
  closeSync(fd);
}

if (scenario === 'put') {
  await store.put('ab/cd/object', Readable.from([Buffer.alloc(MiB, 1), Buffer.alloc(MiB, 2)]));
  answered('put-answered');
} else if (scenario === 'delete') {
  await store.put('ab/cd/object', Readable.from([Buffer.alloc(MiB, 1)]));
  answered('put-answered');
  await store.delete('ab/cd/object');
  answered('delete-answered');
} else if (scenario === 'delete-again') {
  // An earlier delete's unlink went through and its sync did not: the retry finds no object.
  await store.put('ab/cd/object', Readable.from([Buffer.alloc(MiB, 1)]));
  unlinkSync(join(root, 'ab/cd/object'));
  answered('unlinked');
  await store.delete('ab/cd/object');
  answered('delete-answered');
} else {
  const state = await store.startResumable();
  await store.appendResumable('ef/gh/object', state, Readable.from([Buffer.alloc(MiB, 3)]), { offset: 0 });
  answered('append-answered');
  await store.completeResumable('ef/gh/object', state, MiB);
  answered('complete-answered');
}
