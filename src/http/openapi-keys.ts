// The OpenAPI description of the account's keys (src/keys/routes.ts,
// docs/keys.md): make one, list them, revoke one; and of its audit trail
// (src/trail/routes.ts).
import { MAX_KEYS } from '../keys/api-keys.js';
import { FULL, SCOPES } from '../accounts/scopes.js';
import { MAX_OPTION_INT } from '../files/upload-options.js';
import { API_KEY, apiErrors, bodyTimeout, codes, error, json, object, ok, optionalDate, type PathItem, ref, type Schema, success } from './openapi-shared.js';
import { MAX_KEY_CIDRS, MAX_KEY_NAME_LENGTH } from '../keys/routes.js';
import { AUDIT_ACTIONS } from '../audit/actions.js';

const DATE = { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}$', description: '`YYYY-MM-DD HH:MM:SS`, UTC.' };
const scopes: Schema = {
  type: 'array',
  minItems: 1,
  uniqueItems: true,
  items: { type: 'string', enum: [...SCOPES, FULL] },
  description: `What the key may do; \`["${FULL}"]\` is a full key: every scope, including those added later (every key made before scopes existed, and the operator's). \`collections:write\` is reserved: collections do not exist yet.`,
};

const keyFields = {
  key_id: { type: 'string', format: 'uuid', description: 'Identifier of the key; used in paths.' },
  name: { type: ['string', 'null'], description: 'The owner\'s label; null for keys the operator made.' },
  scopes,
  prefix: { type: 'string', description: 'The first 12 characters of the key, to tell keys apart.' },
  created_at: DATE,
  expires_at: optionalDate('After it the key is refused (401); null: never.'),
  last_used_at: optionalDate('When it was last used, to the minute (written at most once a minute); null: never used.'),
  allowed_cidrs: { type: ['array', 'null'], items: { type: 'string' }, description: 'The address ranges it may be used from; null: anywhere.' },
  current: { type: 'boolean', description: 'True for the key of the request that listed it.' },
};

/** The ApiKey schema. */
export const keySchemas = (): Record<string, Schema> => ({
  ApiKey: object(keyFields, 'An API key of the account (never its secret).'),
  AuditEvent: object({
    action: { type: 'string', enum: [...AUDIT_ACTIONS] },
    subject: { type: ['string', 'null'], description: 'What it is about: a key_id, file_id, link_id, request_id or webhook_id; the plan for plan.changed.' },
    actor: { type: 'string', enum: ['key', 'request', 'link', 'operator', 'system'], description: 'A key of the account, an outsider through a file request link, someone downloading through a link (file.downloaded, with AUDIT_DOWNLOADS), the operator (admin API), or the server itself.' },
    key_id: { type: ['string', 'null'], description: 'The key that did it.' },
    key_name: { type: ['string', 'null'], description: 'Its name at the time.' },
    request_id: { type: ['string', 'null'], description: 'The file request whose link an outsider used.' },
    client_address: { type: ['string', 'null'], description: 'The client\'s network: IPv4 /24, IPv6 /48 (the whole address with AUDIT_FULL_ADDRESSES).' },
    created_at: DATE,
  }, 'One change to the account.'),
});

export function keyPaths(): Record<string, PathItem> {
  const forbidden = error(`${codes('insufficient_scope')}: the key lacks \`keys:write\`, or asked for a scope it does not hold (a full key only from a full key); ${codes('key_exceeds_creator')}: the new key would outlive the key making it or allow addresses outside its ranges; ${codes('key_limit')}: the account has ${MAX_KEYS} keys; ${codes('address_not_allowed')}, ${codes('plan_without_api_access')}.`);
  return {
    '/audit': {
      get: {
        operationId: 'listAuditEvents',
        summary: 'The account\'s audit trail, newest first; needs audit:read',
        tags: ['audit'],
        security: API_KEY,
        parameters: [
          { name: 'page', in: 'query', description: 'From 1.', schema: { type: 'integer', minimum: 1, default: 1 } },
          { name: 'limit', in: 'query', description: 'Rows per page.', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
          { name: 'action', in: 'query', description: 'Only this action.', schema: { type: 'string', enum: [...AUDIT_ACTIONS] } },
          { name: 'since', in: 'query', description: 'From this ISO 8601 date or time on (inclusive).', schema: { type: 'string' } },
          { name: 'until', in: 'query', description: 'Before this ISO 8601 date or time.', schema: { type: 'string' } },
        ],
        responses: {
          '200': success('A page of the trail.', object({ success: ok, events: { type: 'array', items: ref('schemas', 'AuditEvent') }, pagination: ref('schemas', 'Pagination') })),
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
        responses: { '200': success('The keys that are not revoked (expired ones included).', object({ success: ok, keys: { type: 'array', items: ref('schemas', 'ApiKey') } })), ...apiErrors },
      },
      post: {
        operationId: 'createKey',
        summary: 'Make a key no wider than the one making it; its secret is answered once; needs keys:write',
        description: 'A key never grants more than the key that made it: only scopes it holds, an expiry no later than its own (absent: its own), address ranges within its own (absent: its own).',
        tags: ['keys'],
        security: API_KEY,
        requestBody: {
          required: true,
          content: json({
            type: 'object',
            required: ['name', 'scopes'],
            additionalProperties: false,
            properties: {
              name: { type: 'string', minLength: 1, maxLength: MAX_KEY_NAME_LENGTH, description: 'Under the filename rules: no control, bidirectional or invisible characters, not blank.' },
              scopes,
              expires_in: { type: 'integer', minimum: 1, maximum: MAX_OPTION_INT, description: 'Seconds until the key is refused.' },
              allowed_cidrs: { type: 'array', maxItems: MAX_KEY_CIDRS, items: { type: 'string' }, description: 'CIDR ranges (IPv4 or IPv6) the key may be used from.' },
            },
          }),
        },
        responses: {
          '201': success('The new key, with its secret `api_key`, shown this once.', object({ success: ok, key: object({ ...keyFields, api_key: { type: 'string', pattern: '^ds_live_', description: 'The key itself: only its SHA-256 is kept.' } }) })),
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
          '200': success('Revoked.', object({ success: ok, message: { type: 'string' } })),
          ...apiErrors,
          '403': forbidden,
          '404': error(`No such key in this account, or already revoked: ${codes('key_not_found')}.`),
          '409': error(`The account's last full key without an expiry: ${codes('last_full_key')}.`),
        },
      },
    },
  };
}
