// Standard Webhooks signatures (https://www.standardwebhooks.com): HMAC-SHA256
// of "id.timestamp.body", keyed by the base64 bytes after "whsec_".
import { createHmac, randomBytes } from 'node:crypto';

const PREFIX = 'whsec_';

/** A new secret: 32 random bytes, as the spec's clients expect it. */
export const newSecret = () => PREFIX + randomBytes(32).toString('base64');

/** One `v1,<base64>` signature. */
export function sign(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.slice(PREFIX.length), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/**
 * The webhook-signature header: one signature per secret, space-separated
 * (during a rotation the old secret signs too, so receivers still holding it
 * verify; the spec lets receivers accept any one of them).
 */
export const signatureHeader = (secrets: string[], id: string, timestamp: number, body: string) =>
  secrets.map((secret) => sign(secret, id, timestamp, body)).join(' ');
