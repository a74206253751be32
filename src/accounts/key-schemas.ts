// The account's keys on the wire (issue 52, "the API described once"): the
// body that makes one, as src/keys/routes.ts validates it, and a key as
// the API shows it. src/openapi/ documents these very schemas.
import { z } from 'zod';
import { MAX_INT32, optionalDate, wireDate } from '../wire-schemas.js';
import { FULL, SCOPES } from './scopes.js';

export const MAX_KEY_NAME_LENGTH = 100;
export const MAX_KEY_CIDRS = 20;

const scopesDescription = `What the key may do; \`["${FULL}"]\` is a full key: every scope, including those added later (every key made before scopes existed, and the operator's). \`collections:write\` is reserved: collections do not exist yet.`;
const scopeNames = [...SCOPES, FULL] as const;

/**
 * A new key's body. The name is cleaned and measured after parsing (the
 * filename rules), and each scope checked by name, so that each gets its own
 * message (key-routes.ts); the document states the result.
 */
export const newKeySchema = z.strictObject({
  name: z.string().meta({ minLength: 1, maxLength: MAX_KEY_NAME_LENGTH, description: 'Under the filename rules: no control, bidirectional or invisible characters, not blank.' }),
  scopes: z
    .array(z.string())
    .min(1)
    .max(SCOPES.length)
    .meta({ description: scopesDescription, uniqueItems: true, override: { items: { type: 'string', enum: [...scopeNames] } } }),
  expires_in: z.number().int().min(1).max(MAX_INT32).optional().meta({ description: 'Seconds until the key is refused.' }),
  allowed_cidrs: z.array(z.string().max(64)).max(MAX_KEY_CIDRS).optional().meta({ description: 'CIDR ranges (IPv4 or IPv6) the key may be used from.' }),
});

const keyFields = {
  key_id: z.uuid().meta({ description: 'Identifier of the key; used in paths.' }),
  name: z.string().nullable().meta({ description: 'The owner\'s label; null for keys the operator made.' }),
  scopes: z.array(z.enum(scopeNames)).min(1).meta({ description: scopesDescription, uniqueItems: true }),
  prefix: z.string().meta({ description: 'The first 12 characters of the key, to tell keys apart.' }),
  created_at: wireDate(),
  expires_at: optionalDate('After it the key is refused (401); null: never.'),
  last_used_at: optionalDate('When it was last used, to the minute (written at most once a minute); null: never used.'),
  allowed_cidrs: z.array(z.string()).nullable().meta({ description: 'The address ranges it may be used from; null: anywhere.' }),
  current: z.boolean().meta({ description: 'True for the key of the request that listed it.' }),
};

/** An API key of the account (never its secret). */
export const apiKeySchema = z.strictObject(keyFields).meta({ description: 'An API key of the account (never its secret).' });
export type KeyAnswer = z.infer<typeof apiKeySchema>;

/** A new key: the key, with its secret shown this once. */
export const newKeyAnswerSchema = z.strictObject({
  ...keyFields,
  api_key: z.string().regex(/^ds_live_/).meta({ description: 'The key itself: only its SHA-256 is kept.' }),
});
