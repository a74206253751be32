// GET /api/v1/audit (issue 57): the account's audit trail, newest first,
// paged as every list is, filtered by action and time; needs audit:read.
import Router from '@koa/router';
import { AUDIT_ACTIONS } from '../audit/actions.js';
import { auditFilterQuery, type AuditEventAnswer } from '../audit/schemas.js';
import type { AuditEntry, AuditTrail } from './trail.js';
import { badRequest } from '../errors.js';
import { formatDate } from '../wire-date.js';
import type { AuthState } from '../http/auth.js';
import { pagination, parseListQuery } from '../http/list-query.js';
import type { Need } from '../http/scoped.js';

function parseFilter(query: Record<string, unknown>) {
  const { page: _page, limit: _limit, ...rest } = query;
  const result = auditFilterQuery.safeParse(rest);
  if (!result.success) {
    const field = String(result.error.issues[0]?.path[0] ?? 'action');
    throw badRequest('invalid_parameter', field === 'action' ? `action must be one of ${AUDIT_ACTIONS.join(', ')}` : `${field} must be an ISO 8601 date or time (2026-11-29, 2026-11-29T10:00:00Z)`);
  }
  return result.data;
}

export const presentAuditEntry = (entry: AuditEntry): AuditEventAnswer => ({
  // The columns are written from AUDIT_ACTIONS and the actor kinds only (src/audit/).
  action: entry.action as AuditEventAnswer['action'],
  subject: entry.subject,
  actor: entry.actor as AuditEventAnswer['actor'],
  key_id: entry.keyPublicId,
  key_name: entry.keyName,
  request_id: entry.requestId,
  client_address: entry.clientAddress,
  created_at: formatDate(entry.createdAt),
});

/** The account's audit trail, mounted at /api/v1/audit. */
export function auditRoutes(need: Need, trail: AuditTrail): Router<AuthState> {
  const router = new Router<AuthState>();
  router.get('/', need('audit:read'), async (ctx) => {
    const { page, limit } = parseListQuery({ page: ctx.query.page, limit: ctx.query.limit });
    const filter = parseFilter(ctx.query);
    const { entries, total } = await trail.list(ctx.state.caller.accountId, filter, page, limit);
    ctx.body = { success: true, events: entries.map(presentAuditEntry), pagination: pagination(page, limit, total) };
  });
  return router;
}
