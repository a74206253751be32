// The API's scopes and audit actions, as the Keys and Activity sections offer
// them. Copies of src/accounts/scopes.ts and src/audit/actions.ts (the page
// does not bundle server code); test/http/web-app.test.ts fails when they
// differ. No DOM here, so that test can import it.
export const SCOPES = ['files:read', 'files:write', 'files:delete', 'links:write', 'requests:write', 'collections:write', 'webhooks:write', 'keys:write', 'stats:read', 'audit:read'] as const;

export const AUDIT_ACTIONS = ['key.created', 'key.revoked', 'file.uploaded', 'file.deleted', 'link.created', 'link.revoked', 'request.opened', 'request.closed', 'webhook.created', 'webhook.deleted', 'plan.changed', 'file.downloaded'] as const;
