// The bytes every party receives: one pseudo-random MiB (AES-CTR keystream
// from a fixed key, so every process makes the same block without sharing a
// file), repeated to the requested size. Random, so nothing on the way can
// compress or deduplicate it; generated as it is sent, so the sender holds
// 1 MiB whatever the size; deterministic, so the SHA-256 of any size is known
// in advance and a client need not hash what it sends (it would steal CPU
// from the two cores the parties already share).
import { createCipheriv, createHash } from 'node:crypto';
import { Readable } from 'node:stream';

export const MiB = 1024 * 1024;

let cached: Buffer | undefined;

/** The repeated MiB. */
export function block(): Buffer {
  if (!cached) {
    const cipher = createCipheriv('aes-128-ctr', Buffer.alloc(16, 'dropstream-bench'), Buffer.alloc(16, 0));
    cached = cipher.update(Buffer.alloc(MiB));
  }
  return cached;
}

/** The first `size` bytes of the endless repetition of block(), in chunks of at most 1 MiB. */
export function* chunks(size: number): Generator<Buffer> {
  const b = block();
  for (let sent = 0; sent < size; ) {
    const chunk = size - sent >= MiB ? b : b.subarray(0, size - sent);
    sent += chunk.length;
    yield chunk;
  }
}

/**
 * chunks(size) as a stream, optionally framed (a multipart head and tail).
 * It pushes the same block object again and again; nobody may modify it.
 */
export function payload(size: number, head?: Buffer, tail?: Buffer): Readable {
  function* framed() {
    if (head) yield head;
    yield* chunks(size);
    if (tail) yield tail;
  }
  return Readable.from(framed(), { objectMode: false, highWaterMark: MiB });
}

const digests = new Map<number, string>();

/** Hex SHA-256 of the first `size` bytes (computed once per size). */
export function sha256Of(size: number): string {
  let digest = digests.get(size);
  if (!digest) {
    const hash = createHash('sha256');
    for (const chunk of chunks(size)) hash.update(chunk);
    digest = hash.digest('hex');
    digests.set(size, digest);
  }
  return digest;
}

/**
 * Peak RSS (VmHWM) of this process, and the CPU seconds it used since
 * `since` (a process.cpuUsage() taken when the timed work began, so module
 * loading is not counted), for a child's result line.
 */
export async function selfAccounting(since?: NodeJS.CpuUsage): Promise<{ peak_rss: number; cpu_s: number }> {
  const { readFile } = await import('node:fs/promises');
  const status = await readFile('/proc/self/status', 'utf8');
  const usage = process.cpuUsage(since);
  return { peak_rss: Number(/VmHWM:\s+(\d+) kB/.exec(status)![1]) * 1024, cpu_s: (usage.user + usage.system) / 1e6 };
}
