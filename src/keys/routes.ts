// The account's API keys, as the owner manages them (issue 57): make one,
// list them, revoke one. Under /api/v1, each route needing keys:write.
import Router from '@koa/router';
import type { ApiKeys, KeySummary, NewKey } from './api-keys.js';
import { normalCidr } from '../accounts/cidr.js';
import { accountErrors } from '../accounts/errors.js';
import { FULL, SCOPES, isScope, type Scope } from '../accounts/scopes.js';
import { MAX_KEY_CIDRS, MAX_KEY_NAME_LENGTH, newKeySchema, type KeyAnswer } from '../accounts/key-schemas.js';
import { normalName, unshowable } from '../files/filename.js';
import { MAX_OPTION_INT } from '../files/upload-options.js';
import { formatDate, formatOptionalDate } from '../wire-date.js';
import type { AuthState } from '../http/auth.js';
import { jsonBody } from '../http/json-body.js';
import type { Need } from '../http/scoped.js';

export interface KeyRouteDeps {
  keys: ApiKeys;
  /** BODY_TIMEOUT in milliseconds. */
  bodyTimeoutMs: number;
}

const invalid = (message: string) => accountErrors.invalidKeyRequest(message);

const WANTED: Record<string, string> = {
  name: `a string of 1 to ${MAX_KEY_NAME_LENGTH} characters`,
  scopes: `a non-empty list of ${SCOPES.join(', ')}, or ["${FULL}"] for a full key`,
  expires_in: `an integer from 1 to ${MAX_OPTION_INT} (seconds)`,
  allowed_cidrs: `a list of at most ${MAX_KEY_CIDRS} CIDR ranges ("203.0.113.0/24", "2001:db8::/32")`,
};

export function parseNewKey(body: unknown): NewKey {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw invalid('the body must be a JSON object');
  const result = newKeySchema.safeParse(body);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    if (issue.code === 'unrecognized_keys') throw invalid(`unknown field "${issue.keys[0]!.slice(0, 64)}": a key takes ${Object.keys(WANTED).join(', ')}`);
    const field = String(issue.path[0] ?? '');
    throw invalid(`${field} must be ${WANTED[field] ?? 'valid'}`);
  }
  const { name: rawName, scopes: asked, expires_in: expiresIn, allowed_cidrs: rawCidrs } = result.data;
  // Shown in every listing, as a filename is: the filename rules (no control, bidirectional or invisible characters, not blank).
  const name = normalName(rawName);
  const problem = unshowable(name, 'the name') ?? ([...name].length > MAX_KEY_NAME_LENGTH ? `longer than ${MAX_KEY_NAME_LENGTH} characters` : undefined);
  if (problem) throw invalid(`name: ${problem}`);
  let scopes: NewKey['scopes'];
  if (asked.includes(FULL)) {
    if (asked.length > 1) throw invalid(`scopes: "${FULL}" (a full key) stands alone`);
    scopes = 'full';
  } else {
    const unknown = asked.find((scope) => !isScope(scope));
    if (unknown !== undefined) throw invalid(`scopes: unknown scope "${unknown.slice(0, 64)}"; the scopes are ${SCOPES.join(', ')}`);
    scopes = [...new Set(asked as Scope[])];
  }
  const allowedCidrs = rawCidrs?.map((text) => normalCidr(text) ?? (() => { throw invalid(`allowed_cidrs: "${text}" is not a CIDR range`); })());
  return { name, scopes, expiresIn, allowedCidrs: allowedCidrs && [...new Set(allowedCidrs)] };
}

export const presentKey = (key: KeySummary): KeyAnswer => ({
  key_id: key.id,
  name: key.name,
  scopes: (key.full ? [FULL] : key.scopes) as KeyAnswer['scopes'],
  prefix: key.prefix,
  created_at: formatDate(key.createdAt),
  expires_at: formatOptionalDate(key.expiresAt),
  last_used_at: formatOptionalDate(key.lastUsedAt),
  allowed_cidrs: key.allowedCidrs.length > 0 ? key.allowedCidrs : null,
  current: key.current,
});

/** The account's keys, mounted at /api/v1/keys. */
export function keyRoutes(need: Need, { keys, bodyTimeoutMs }: KeyRouteDeps): Router<AuthState> {
  const router = new Router<AuthState>();
  const body = jsonBody({ limit: '16kb', invalid: () => invalid('the body must be a JSON object'), timeoutMs: bodyTimeoutMs });
  router.post('/', need('keys:write'), body, async (ctx) => {
    const { caller } = ctx.state;
    const { secret, ...key } = await keys.create(caller.accountId, caller.key!, parseNewKey(ctx.request.body ?? {}), caller.actor);
    ctx.status = 201;
    ctx.body = { success: true, key: { ...presentKey(key), api_key: secret } };
  });

  router.get('/', need('keys:write'), async (ctx) => {
    const { caller } = ctx.state;
    ctx.body = { success: true, keys: (await keys.list(caller.accountId, caller.key!)).map(presentKey) };
  });

  router.delete('/:id', need('keys:write'), async (ctx) => {
    const { caller } = ctx.state;
    await keys.revoke(caller.accountId, caller.key!, ctx.params.id!, caller.actor);
    ctx.body = { success: true, message: 'Key revoked' };
  });
  return router;
}
