// What the audit trail records (issue 57): what changed the account.
export const AUDIT_ACTIONS = [
  'key.created',
  'key.revoked',
  'file.uploaded',
  'file.deleted',
  'link.created',
  'link.revoked',
  'request.opened',
  'request.closed',
  'webhook.created',
  'webhook.deleted',
  'webhook.secret_rotated',
  'plan.changed',
  /** Only with AUDIT_DOWNLOADS: a complete download through a link (the actor is the link's user, known by address only). */
  'file.downloaded',
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];
