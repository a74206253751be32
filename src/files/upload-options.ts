// What the owner of a file may ask for when uploading it, or when making a
// link to it: `expires_in` (seconds), `max_downloads` and `password`. The
// same keys arrive as multipart text fields (before the file part), as tus
// Upload-Metadata, and as the JSON of POST /files/{id}/links; values are
// strings from the first two and JSON values from the last, checked alike.
import { badRequest } from '../errors.js';
import { MAX_INT32 } from '../wire-schemas.js';
import { hashPassword } from '../links/link-password.js';
import type { LinkRules } from '../links/links.js';

/** The options' names, as the client sends them. */
export const OPTION_NAMES = ['expires_in', 'max_downloads', 'password'] as const;
export type OptionName = (typeof OPTION_NAMES)[number];

export const isOptionName = (name: string): name is OptionName => (OPTION_NAMES as readonly string[]).includes(name);

/** The largest expires_in and max_downloads: PostgreSQL's integer (68 years of seconds). */
export const MAX_OPTION_INT = MAX_INT32;
export const MAX_PASSWORD_LENGTH = 256;

export interface UploadOptions {
  /** Seconds from the file's creation (or the link's) to its expiry. */
  expiresIn?: number;
  maxDownloads?: number;
  password?: string;
}

/** Where option values come from: text (multipart fields, Upload-Metadata), or JSON, where numbers must be numbers. */
export type OptionSource = 'text' | 'json';

function positiveInt(value: unknown, code: 'invalid_expires_in' | 'invalid_max_downloads', name: string, source: OptionSource): number {
  const n = source === 'json' ? (typeof value === 'number' ? value : NaN) : typeof value === 'string' && /^[0-9]{1,10}$/.test(value) ? Number(value) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_OPTION_INT) throw badRequest(code, `${name} must be an integer from 1 to ${MAX_OPTION_INT}`);
  return n;
}

function password(value: unknown): string {
  // Characters as people count them (code points), not UTF-16 units.
  const length = typeof value === 'string' ? [...value].length : 0;
  if (length < 1 || length > MAX_PASSWORD_LENGTH) throw badRequest('invalid_password', `password must be 1 to ${MAX_PASSWORD_LENGTH} characters`);
  return value as string;
}

/** Checks the options among `given` (other names are not ours and are left alone); 400 naming the first bad one. */
export function parseUploadOptions(given: ReadonlyMap<string, unknown> | Record<string, unknown>, source: OptionSource = 'text'): UploadOptions {
  const get = (name: OptionName) => (given instanceof Map ? given.get(name) : (given as Record<string, unknown>)[name]);
  const options: UploadOptions = {};
  const expiresIn = get('expires_in');
  const maxDownloads = get('max_downloads');
  const secret = get('password');
  if (expiresIn !== undefined && expiresIn !== null) options.expiresIn = positiveInt(expiresIn, 'invalid_expires_in', 'expires_in', source);
  if (maxDownloads !== undefined && maxDownloads !== null) options.maxDownloads = positiveInt(maxDownloads, 'invalid_max_downloads', 'max_downloads', source);
  if (secret !== undefined && secret !== null) options.password = password(secret);
  return options;
}

/**
 * The plan's retention (max_expires_in, seconds; null: none): an upload
 * without expires_in gets it, a longer one is 400 invalid_expires_in.
 */
export function withRetention(options: UploadOptions, maxExpiresIn: number | null): UploadOptions {
  if (maxExpiresIn === null) return options;
  if (options.expiresIn === undefined) return { ...options, expiresIn: maxExpiresIn };
  if (options.expiresIn > maxExpiresIn) throw badRequest('invalid_expires_in', `expires_in must be at most ${maxExpiresIn} seconds on this plan`);
  return options;
}

/** A time `seconds` after `from`. */
export const after = (from: Date, seconds: number) => new Date(from.getTime() + seconds * 1000);

/** The link rules of `options` (the password hashed; expires_in from `now`). */
export async function linkRulesOf(options: UploadOptions, now: Date): Promise<LinkRules> {
  return {
    expiresAt: options.expiresIn === undefined ? undefined : after(now, options.expiresIn),
    maxDownloads: options.maxDownloads,
    passwordHash: options.password === undefined ? undefined : await hashPassword(options.password),
  };
}
