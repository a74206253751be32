// What an API key may do (issue 57). Few scopes, each named after what it
// allows; every /api/v1 route declares the one it needs next to its
// definition (src/http/scoped.ts), and test/keys/key-scopes.test.ts walks the
// router for one without. A full key (every key made before scopes existed,
// the operator's, and keys made with ["*"]) holds every scope, including
// those added later.
import type { CallerKey } from './types.js';

export const SCOPES = [
  /** List and read files and their links (GET /files, /files/{id}, /files/{id}/links). */
  'files:read',
  /** Upload: plain, tus (create, write, resume, list and end uploads in progress). */
  'files:write',
  /** Delete files. */
  'files:delete',
  /** Make and revoke a file's links. */
  'links:write',
  /** Open, list, read and close file requests. */
  'requests:write',
  /** Reserved: collections do not exist yet; a key may carry the scope so that it works once they do. */
  'collections:write',
  /** Add, list, rotate and remove webhooks, and read their deliveries. */
  'webhooks:write',
  /** Make, list and revoke the account's keys (never wider than the key doing it). */
  'keys:write',
  /** Read the account's statistics and limits (GET /stats). */
  'stats:read',
  /** Read the account's audit trail (GET /audit). */
  'audit:read',
] as const;

export type Scope = (typeof SCOPES)[number];

/** What a new key asks for as its scopes to be a full key. */
export const FULL = '*';

export const isScope = (name: string): name is Scope => (SCOPES as readonly string[]).includes(name);

export const holds = (key: CallerKey, scope: Scope): boolean => key.full || key.scopes.includes(scope);
