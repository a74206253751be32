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

/** Who is calling: the account behind a valid API key, with its current plan. */
export interface Caller {
  accountId: number;
  plan: Plan;
}
