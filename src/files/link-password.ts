// Link passwords, kept only as a slow salted hash: scrypt from node:crypto
// (no native package to build), with a random 16-byte salt per password.
// The stored form names its parameters, so they can be raised later and old
// hashes still verify: `scrypt$N$r$p$<salt base64url>$<hash base64url>`.
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * N = 2^14, r = 8: 16 MiB of memory and tens of milliseconds per hash
 * (OWASP's scrypt minimum is N = 2^17 with p = 1, or N = 2^14 with more
 * work per request through p; we take the cheaper memory figure and let the
 * failure limiter bound guessing: each wrong password counts toward it).
 */
const PARAMS = { N: 2 ** 14, r: 8, p: 1 };
const KEY_BYTES = 32;

function derive(password: string, salt: Buffer, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, KEY_BYTES, { ...options, maxmem: 64 * 1024 * 1024 }, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, PARAMS);
  return ['scrypt', PARAMS.N, PARAMS.r, PARAMS.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** Whether `password` is the one `stored` was made from; false for a stored form we cannot read. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await derive(password, Buffer.from(salt, 'base64url'), { N: Number(n), r: Number(r), p: Number(p) });
  return key.length === expected.length && timingSafeEqual(key, expected);
}
