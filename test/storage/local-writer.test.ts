// The plain upload's writer on the local store (fileWriter, local-append.ts):
// how its writes reach the file. A write per 64 KiB chunk of the body cost
// a plain upload 0.4x the busboy-to-file party (docs/performance.md), so it
// batches as a resumable append does.
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FileHandle } from 'node:fs/promises';
import { expect } from 'chai';
import { fileWriter } from '../../src/storage/local-append.js';

const KiB = 1024;
const MiB = 1024 * KiB;

/** A handle that records its calls and keeps what is written. */
function recordingHandle() {
  const calls: string[] = [];
  const file = Buffer.alloc(16 * MiB);
  const handle = {
    async writev(buffers: Buffer[], position: number) {
      const size = buffers.reduce((n, b) => n + b.length, 0);
      Buffer.concat(buffers).copy(file, position);
      calls.push(`writev ${size} at ${position}`);
      return { bytesWritten: size };
    },
    async datasync() {
      calls.push('datasync');
    },
    async close() {
      calls.push('close');
    },
  } as unknown as FileHandle;
  return { handle, calls, file };
}
const bound = (_op: string, _bytes: number, work: () => Promise<unknown>) => work().then(() => undefined);

describe('the local store: a plain upload\'s writes', () => {
  it('when the body comes in 64 KiB chunks, then the file is written in 1 MiB batches at their offsets, then synced, then closed', async () => {
    const { handle, calls, file } = recordingHandle();
    const chunks = Array.from({ length: 130 }, (_, i) => Buffer.alloc(64 * KiB, i));
    const out = fileWriter(handle, bound);
    await pipeline(Readable.from(chunks), out);
    const writes = Array.from({ length: 8 }, (_, i) => `writev ${MiB} at ${i * MiB}`);
    expect(calls).to.deep.equal([...writes, `writev ${128 * KiB} at ${8 * MiB}`, 'datasync', 'close']);
    expect(out.bytesWritten).to.equal(130 * 64 * KiB);
    expect(file.subarray(0, 130 * 64 * KiB).equals(Buffer.concat(chunks))).to.equal(true);
  });
});
