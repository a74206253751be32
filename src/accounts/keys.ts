// API keys: 192 random bits behind a recognisable prefix, so leaked keys can
// be found by secret scanners. Only the SHA-256 is stored: a fast hash is
// enough because the key itself is random, not a password.
import { hash, randomBytes } from 'node:crypto';

export const KEY_PREFIX = 'ds_live_';

export function newApiKey(): { key: string; hash: string; prefix: string } {
  const key = KEY_PREFIX + randomBytes(24).toString('base64url');
  return { key, hash: hashApiKey(key), prefix: key.slice(0, KEY_PREFIX.length + 4) };
}

// crypto.hash: one call into OpenSSL instead of a Hash object per request (every API request hashes its key).
export function hashApiKey(key: string): string {
  return hash('sha256', key, 'hex');
}

