import type { Actor } from '../audit/actor.js';

// The account component's types, in a module of their own so that the
// modules using them (the caller cache, the services, files/ and http/)
// import them one way, whatever imports what among those modules.

export interface Plan {
  name: string;
  apiAccess: boolean;
  requestsPerMinute: number;
  requestsPerDay: number;
  /** Bytes. */
  maxFileSize: number;
  dailyUploads: number;
  /** Uploads the account may run at once, across all instances; null: no cap. */
  concurrentUploads: number | null;
  /** Bytes the account may store in all; null: no limit. */
  maxTotalSize: number | null;
  /** Longest expires_in (seconds) an upload may ask for, and the default; null: files may live for ever. */
  maxExpiresIn: number | null;
}

/** The API key a request came with: what it may do, until when, from where. */
export interface CallerKey {
  /** api_keys.id (internal; the API shows public_id). */
  id: number;
  /** key_id in the API. */
  publicId: string;
  /** The owner's label; null for the operator's keys. */
  name: string | null;
  /** Holds every scope, now and later. */
  full: boolean;
  /** Its scopes when not full (src/accounts/scopes.ts). */
  scopes: readonly string[];
  /** Epoch milliseconds after which it is refused; null: never. */
  expiresAt: number | null;
  /** The CIDR ranges it may be used from, as given; empty: anywhere. */
  allowedCidrs: readonly string[];
}

/** Who is calling: the account behind a valid API key, with its current plan, and the key. */
export interface Caller {
  accountId: number;
  plan: Plan;
  /** Absent for an outsider acting through a file request link (src/requests/link-routes.ts): no /api/v1 route lets them in. */
  key?: CallerKey;
  /** Who this request is, for the audit trail: set per request (the key, or the file request link, and the client address). */
  actor?: Actor;
}
