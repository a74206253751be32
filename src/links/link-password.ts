// Link passwords, kept only as a slow salted hash: scrypt from node:crypto
// (no native package to build), with a random 16-byte salt per password.
// The stored form names its parameters, so they can be raised later and old
// hashes still verify: `scrypt$N$r$p$<salt base64url>$<hash base64url>`.
import { createHmac, randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import pLimit from 'p-limit';
import { linkErrors } from './errors.js';

/**
 * N = 2^14, r = 8: 16 MiB of memory and tens of milliseconds per hash
 * (OWASP's scrypt minimum is N = 2^17 with p = 1, or N = 2^14 with more
 * work per request through p; we take the cheaper memory figure and let the
 * failure limiter bound guessing: each wrong password counts toward it).
 */
const PARAMS = { N: 2 ** 14, r: 8, p: 1 };
const KEY_BYTES = 32;

/** How many times scrypt has run in this process (tests read it to see the cache at work). */
export const derivations = { count: 0 };

/**
 * scrypt runs on libuv's thread pool (4 threads unless UV_THREADPOOL_SIZE
 * says otherwise), which the local store's file reads and writes and DNS
 * lookups share. Unbounded, 960 wrong guesses queued a 100 KB download's
 * reads behind them for 19.3 s (issue 38). At most DERIVING run at once, so
 * two threads stay free for the download path; at most WAITING more wait
 * their turn (under half a second on this machine's 2 cores, so a wait is
 * bounded by the queue, not a timer), and a check beyond that is refused
 * with 429 at once instead of queued.
 */
export const PASSWORD_CHECKS = { deriving: 2, waiting: 16 };
const gate = pLimit(PASSWORD_CHECKS.deriving);

function scryptKey(password: string, salt: Buffer, options: ScryptOptions): Promise<Buffer> {
  derivations.count += 1;
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, KEY_BYTES, { ...options, maxmem: 64 * 1024 * 1024 }, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

/**
 * scrypt through the gate. A guess (`refuseWhenFull`) is refused when the
 * queue is full; a new link's hash (an account's upload, already held to
 * its plan's request limits) waits its turn instead of failing the upload.
 */
function derive(password: string, salt: Buffer, options: ScryptOptions, refuseWhenFull: boolean): Promise<Buffer> {
  if (refuseWhenFull && gate.activeCount + gate.pendingCount >= PASSWORD_CHECKS.deriving + PASSWORD_CHECKS.waiting) {
    return Promise.reject(linkErrors.checksBusy());
  }
  return gate(() => scryptKey(password, salt, options));
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, PARAMS, false);
  return ['scrypt', PARAMS.N, PARAMS.r, PARAMS.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/**
 * Passwords verified lately, so the requests of one download (a download
 * manager's ranges, a resumed transfer, a browser's retries) pay scrypt's
 * 16 MiB and tens of milliseconds once, not each. An entry is an HMAC of
 * the stored hash and the password under a key of this process (never the
 * password, nor a fast hash an offline guess could test); a new password
 * for the link is a new stored hash, so it misses. Only successes are kept:
 * a wrong password always pays the full price (and counts toward the
 * failure limits, which the caller reserves before).
 */
const VERIFIED_MS = 5 * 60 * 1000;
const VERIFIED_MAX = 10_000;
const cacheKey = randomBytes(32);
const verified = new Map<string, number>();

function entryOf(password: string, stored: string): string {
  return createHmac('sha256', cacheKey).update(stored).update('\0').update(password.normalize('NFC')).digest('base64url');
}

function remember(entry: string, now: number): void {
  verified.delete(entry);
  verified.set(entry, now + VERIFIED_MS);
  // Oldest first (a Map keeps insertion order): drop what is over the bound.
  for (const oldest of verified.keys()) {
    if (verified.size <= VERIFIED_MAX) break;
    verified.delete(oldest);
  }
}

/** Whether `password` was verified against `stored` lately: right, with no scrypt to run (and nothing to reserve for it). */
export function verifiedLately(password: string, stored: string): boolean {
  const until = verified.get(entryOf(password, stored));
  return until !== undefined && until > Date.now();
}

/**
 * Whether `password` is the one `stored` was made from; false for a stored
 * form we cannot read. Throws 429 password_checks_busy when the gate's queue is full.
 */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  if (verifiedLately(password, stored)) return true;
  const expected = Buffer.from(hash, 'base64url');
  const key = await derive(password, Buffer.from(salt, 'base64url'), { N: Number(n), r: Number(r), p: Number(p) }, true);
  const right = key.length === expected.length && timingSafeEqual(key, expected);
  if (right) remember(entryOf(password, stored), Date.now());
  return right;
}
