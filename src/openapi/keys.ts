// The OpenAPI description of the account's keys (src/http/key-routes.ts,
// docs/keys.md): make one, list them, revoke one; and of its audit trail
// (src/http/audit-routes.ts). The schemas are src/accounts/key-schemas.ts's
// and src/audit/schemas.ts's.
import { z } from 'zod';
import { MAX_KEYS } from '../keys/api-keys.js';
import { apiKeySchema, newKeySchema, newKeyAnswerSchema } from '../accounts/key-schemas.js';
import { auditEventSchema, auditFilterQuery } from '../audit/schemas.js';
import { ok, pageQuery, paginationSchema } from '../wire-schemas.js';
import { API_KEY, apiErrors, bodyTimeout, codes, error, json, type PathItem, type AnySchema, success } from './shared.js';

/** The ApiKey and AuditEvent schemas (src/accounts/key-schemas.ts, src/audit/schemas.ts). */
export const keySchemas = (): Record<string, AnySchema> => ({ ApiKey: apiKeySchema, AuditEvent: auditEventSchema });

export function keyPaths(): Record<string, PathItem> {
  const forbidden = error(`${codes('insufficient_scope')}: the key lacks \`keys:write\`, or asked for a scope it does not hold (a full key only from a full key); ${codes('key_exceeds_creator')}: the new key would outlive the key making it or allow addresses outside its ranges; ${codes('key_limit')}: the account has ${MAX_KEYS} keys; ${codes('address_not_allowed')}, ${codes('plan_without_api_access')}.`);
  return {
    '/audit': {
      get: {
        operationId: 'listAuditEvents',
        summary: 'The account\'s audit trail, newest first; needs audit:read',
        tags: ['audit'],
        security: API_KEY,
        requestParams: { query: pageQuery.extend(auditFilterQuery.shape) },
        responses: {
          '200': success('A page of the trail.', z.strictObject({ success: ok, events: z.array(auditEventSchema), pagination: paginationSchema })),
          ...apiErrors,
          '400': error(`A bad page, limit, action or time: ${codes('invalid_parameter')}.`),
        },
      },
    },
    '/keys': {
      get: {
        operationId: 'listKeys',
        summary: 'List the account\'s keys (never their secrets), newest first; needs keys:write',
        tags: ['keys'],
        security: API_KEY,
        responses: { '200': success('The keys that are not revoked (expired ones included).', z.strictObject({ success: ok, keys: z.array(apiKeySchema) })), ...apiErrors },
      },
      post: {
        operationId: 'createKey',
        summary: 'Make a key no wider than the one making it; its secret is answered once; needs keys:write',
        description: 'A key never grants more than the key that made it: only scopes it holds, an expiry no later than its own (absent: its own), address ranges within its own (absent: its own).',
        tags: ['keys'],
        security: API_KEY,
        requestBody: { required: true, content: json(newKeySchema) },
        responses: {
          '201': success('The new key, with its secret `api_key`, shown this once.', z.strictObject({ success: ok, key: newKeyAnswerSchema })),
          ...apiErrors,
          '400': error(`A bad body: ${codes('invalid_key_request')}.`),
          '403': forbidden,
          '408': bodyTimeout,
        },
      },
    },
    '/keys/{key_id}': {
      parameters: [{ name: 'key_id', in: 'path', required: true, description: 'The key\'s `key_id`.', schema: { type: 'string' } }],
      delete: {
        operationId: 'revokeKey',
        summary: 'Revoke a key on every instance at once; needs keys:write',
        description: 'A key revokes only keys no wider than itself. The account\'s last full key without an expiry is never revoked here (409): the operator\'s `dropstream keys rotate --account <id>` replaces every key.',
        tags: ['keys'],
        security: API_KEY,
        responses: {
          '200': success('Revoked.', z.strictObject({ success: ok, message: z.string() })),
          ...apiErrors,
          '403': forbidden,
          '404': error(`No such key in this account, or already revoked: ${codes('key_not_found')}.`),
          '409': error(`The account's last full key without an expiry: ${codes('last_full_key')}.`),
        },
      },
    },
  };
}
