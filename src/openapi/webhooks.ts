// The OpenAPI description of webhooks (src/http/webhook-routes.ts,
// docs/webhooks.md): the five operations under /webhooks, their schemas,
// and the events dropstream sends, as OpenAPI 3.1's top-level `webhooks`.
// The schemas are src/webhooks/schemas.ts's.
import { z } from 'zod';
import { EVENT_TYPES } from '../webhooks/events.js';
import { DELIVERIES_SHOWN, MAX_WEBHOOKS_PER_ACCOUNT } from '../webhooks/endpoints.js';
import { deliverySchema, eventSchemaOf, eventSchemas, newWebhookSchema, webhookSchema, webhookWithSecretSchema } from '../webhooks/schemas.js';
import { ok } from '../wire-schemas.js';
import { API_KEY, apiErrors, bodyTimeout, codes, error, json, type PathItem, ref, type AnySchema, success } from './shared.js';

/** The Webhook, WebhookDelivery and event schemas (src/webhooks/schemas.ts). */
export const webhookSchemas = (): Record<string, AnySchema> => ({ Webhook: webhookSchema, WebhookDelivery: deliverySchema, ...eventSchemas });

/** The events as OpenAPI 3.1 `webhooks`: what dropstream POSTs to a webhook's url. */
export function webhookEvents(): Record<string, PathItem> {
  const headers = [
    { name: 'webhook-id', in: 'header' as const, required: true, description: 'The message id (`msg_...`): the same on every retry; deduplicate on it.', schema: { type: 'string' } },
    { name: 'webhook-timestamp', in: 'header' as const, required: true, description: 'Unix seconds of this try.', schema: { type: 'string' } },
    { name: 'webhook-signature', in: 'header' as const, required: true, description: '`v1,<base64 HMAC-SHA256 of id.timestamp.body>` per secret, space-separated (two during a rotation).', schema: { type: 'string' } },
  ];
  const event = (type: string, schema: string): PathItem => ({
    post: {
      operationId: `event_${type.replace('.', '_')}`,
      summary: `The ${type} event`,
      tags: ['webhooks'],
      security: [],
      parameters: headers,
      requestBody: { required: true, content: json(ref('schemas', schema)) },
      responses: { '2XX': { description: 'Delivered. Anything else (or no answer in 10 s) is tried again with backoff (docs/webhooks.md).' } },
    },
  });
  return Object.fromEntries(EVENT_TYPES.map((type) => [type, event(type, eventSchemaOf(type))]));
}

export function webhookPaths(): Record<string, PathItem> {
  const webhook = webhookSchema;
  const withSecret = webhookWithSecretSchema;
  const notFound = error(`No such webhook in this account (another account's gives the same answer): ${codes('webhook_not_found')}.`);
  const idParameter = { name: 'webhook_id', in: 'path' as const, required: true, description: 'The webhook\'s `webhook_id`.', schema: { type: 'string' } };
  return {
    '/webhooks': {
      get: {
        operationId: 'listWebhooks',
        summary: 'List the account\'s webhooks (without secrets)',
        tags: ['webhooks'],
        security: API_KEY,
        responses: { '200': success('The webhooks, oldest first.', z.strictObject({ success: ok, webhooks: z.array(webhook) })), ...apiErrors },
      },
      post: {
        operationId: 'createWebhook',
        summary: 'Add a webhook; its secret is answered once',
        description: `\`events\` omitted: every event type. At most ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks per account.`,
        tags: ['webhooks'],
        security: API_KEY,
        requestBody: {
          required: true,
          content: json(newWebhookSchema),
        },
        responses: {
          '201': success('The new webhook, with its secret.', z.strictObject({ success: ok, webhook: withSecret })),
          ...apiErrors,
          '400': error(`A bad body: ${codes('invalid_webhook')}.`),
          '408': bodyTimeout,
          '403': error(`The account already has ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks: ${codes('webhook_limit')}; or ${codes('plan_without_api_access')}.`),
        },
      },
    },
    '/webhooks/{webhook_id}': {
      parameters: [idParameter],
      delete: {
        operationId: 'deleteWebhook',
        summary: 'Remove a webhook and its undelivered messages',
        tags: ['webhooks'],
        security: API_KEY,
        responses: { '200': success('Removed.', z.strictObject({ success: ok, message: z.string() })), ...apiErrors, '404': notFound },
      },
    },
    '/webhooks/{webhook_id}/rotate-secret': {
      parameters: [idParameter],
      post: {
        operationId: 'rotateWebhookSecret',
        summary: 'A new secret; the old one signs alongside for 24 hours',
        tags: ['webhooks'],
        security: API_KEY,
        responses: { '200': success('The webhook with its new secret.', z.strictObject({ success: ok, webhook: withSecret })), ...apiErrors, '404': notFound },
      },
    },
    '/webhooks/{webhook_id}/deliveries': {
      parameters: [idParameter],
      get: {
        operationId: 'listWebhookDeliveries',
        summary: `The webhook's newest ${DELIVERIES_SHOWN} deliveries`,
        tags: ['webhooks'],
        security: API_KEY,
        responses: { '200': success('Newest first.', z.strictObject({ success: ok, deliveries: z.array(deliverySchema) })), ...apiErrors, '404': notFound },
      },
    },
  };
}
