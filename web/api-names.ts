// The API's scopes, audit actions and webhook events, as the Keys, Activity
// and Webhooks sections offer them. Copies of src/accounts/scopes.ts,
// src/audit/actions.ts and src/webhooks/events.ts (the page
// does not bundle server code); test/pages/web-app.test.ts fails when they
// differ. No DOM here, so that test can import it.
export const SCOPES = ['files:read', 'files:write', 'files:delete', 'links:write', 'requests:write', 'collections:write', 'webhooks:write', 'keys:write', 'stats:read', 'audit:read'] as const;

export const AUDIT_ACTIONS = ['key.created', 'key.revoked', 'file.uploaded', 'file.deleted', 'link.created', 'link.revoked', 'request.opened', 'request.closed', 'webhook.created', 'webhook.deleted', 'webhook.secret_rotated', 'plan.changed', 'file.downloaded'] as const;

export const WEBHOOK_EVENTS = ['file.uploaded', 'file.deleted', 'file.downloaded', 'link.exhausted', 'upload.expired'] as const;
