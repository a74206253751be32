// The OpenAPI description of webhooks (src/webhooks/routes.ts,
// docs/webhooks.md): the five operations under /webhooks, their schemas,
// and the events dropstream sends, as OpenAPI 3.1's top-level `webhooks`.
import { EVENT_TYPES } from '../webhooks/events.js';
import { DELIVERIES_SHOWN, MAX_WEBHOOKS_PER_ACCOUNT } from '../webhooks/endpoints.js';
import { API_KEY, apiErrors, bodyTimeout, codes, count, error, json, object, ok, optionalDate, type PathItem, ref, type Schema, success } from './openapi-shared.js';

const DATE = { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}$', description: '`YYYY-MM-DD HH:MM:SS`, UTC.' };
const eventType: Schema = { type: 'string', enum: [...EVENT_TYPES] };

const webhookFields = {
  webhook_id: { type: 'string', pattern: '^wh_[A-Za-z0-9_-]{16}$', description: 'Identifier of the webhook; used in paths.' },
  url: { type: 'string', format: 'uri', description: 'Where events are POSTed.' },
  events: { type: 'array', minItems: 1, uniqueItems: true, items: eventType, description: 'The event types it receives.' },
  created_at: DATE,
  disabled: { type: 'boolean', description: 'True once deliveries failed for WEBHOOK_RETRY_HOURS: nothing more is sent.' },
  disabled_at: optionalDate('When it was disabled; null while enabled.'),
  paused_until: optionalDate('While its sends time out again and again: nothing is sent to it before this time, then one message at a time until it answers. Null otherwise.'),
};

const secret: Schema = { type: 'string', pattern: '^whsec_[A-Za-z0-9+/]+=*$', description: 'The signing secret (Standard Webhooks), shown in this answer only.' };

/** The Webhook, WebhookDelivery and event schemas. */
export function webhookSchemas(): Record<string, Schema> {
  const file = object({
    file_id: { type: 'integer', minimum: 1, maximum: 2147483647 },
    filename: { type: 'string' },
    size: count('Bytes.'),
    sha256: { type: 'string', pattern: '^[0-9a-f]{64}$' },
    upload_date: DATE,
    download_count: count('Complete downloads, this one included for file.downloaded.'),
    expires_at: optionalDate('When the file expires; null: never.'),
    request_id: { type: ['string', 'null'], description: 'The file request it came through; null for the account\'s own uploads.' },
  }, 'The file as the API shows it (without public_link), plus its SHA-256.');
  const envelope = (type: string, data: Schema): Schema =>
    object({ type: { type: 'string', const: type }, timestamp: { type: 'string', format: 'date-time', description: 'When the event happened, RFC 3339.' }, data });
  return {
    Webhook: object(webhookFields, 'A webhook endpoint of the account.'),
    WebhookDelivery: object({
      message_id: { type: 'string', pattern: '^msg_[0-9a-f]{32}$', description: 'The `webhook-id` header: the same on every try of this event.' },
      type: eventType,
      status: { type: 'string', enum: ['pending', 'delivered', 'failed'] },
      attempts: count('Tries so far.'),
      last_status: { type: ['integer', 'null'], description: 'The receiver\'s last HTTP status; null when it did not answer.' },
      last_error: { type: ['string', 'null'], description: 'Why the last try failed. A destination that is not a public address (after DNS) says `destination is not a public address`, never the address.' },
      next_attempt_at: optionalDate('When it is tried next; null once delivered or given up.'),
      delivered_at: optionalDate('When a receiver answered 2xx.'),
      created_at: DATE,
    }, 'One event\'s delivery to the webhook.'),
    FileEvent: { oneOf: ['file.uploaded', 'file.deleted', 'file.downloaded'].map((type) => envelope(type, file)) },
    LinkExhaustedEvent: envelope('link.exhausted', object({ link_id: { type: 'string', format: 'uuid' }, max_downloads: { type: 'integer', minimum: 1 }, download_count: count('The link\'s complete downloads.'), file })),
    UploadExpiredEvent: envelope('upload.expired', object({
      upload_id: { type: 'string' },
      filename: { type: 'string' },
      length: { type: ['integer', 'null'], minimum: 0, description: 'Upload-Length; null when it was deferred.' },
      offset: count('Bytes it had received.'),
      created_at: DATE,
    })),
  };
}

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
  return Object.fromEntries(EVENT_TYPES.map((type) => [type, event(type, type === 'link.exhausted' ? 'LinkExhaustedEvent' : type === 'upload.expired' ? 'UploadExpiredEvent' : 'FileEvent')]));
}

export function webhookPaths(): Record<string, PathItem> {
  const webhook = ref('schemas', 'Webhook');
  const withSecret = object({ ...webhookFields, secret });
  const notFound = error(`No such webhook in this account (another account's gives the same answer): ${codes('webhook_not_found')}.`);
  const idParameter = { name: 'webhook_id', in: 'path' as const, required: true, description: 'The webhook\'s `webhook_id`.', schema: { type: 'string' } };
  return {
    '/webhooks': {
      get: {
        operationId: 'listWebhooks',
        summary: 'List the account\'s webhooks (without secrets)',
        tags: ['webhooks'],
        security: API_KEY,
        responses: { '200': success('The webhooks, oldest first.', object({ success: ok, webhooks: { type: 'array', items: webhook } })), ...apiErrors },
      },
      post: {
        operationId: 'createWebhook',
        summary: 'Add a webhook; its secret is answered once',
        description: `\`events\` omitted: every event type. At most ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks per account.`,
        tags: ['webhooks'],
        security: API_KEY,
        requestBody: {
          required: true,
          content: json({ type: 'object', required: ['url'], additionalProperties: false, properties: { url: { type: 'string', format: 'uri', maxLength: 2048, pattern: '^https?://' }, events: { type: 'array', minItems: 1, items: eventType } } }),
        },
        responses: {
          '201': success('The new webhook, with its secret.', object({ success: ok, webhook: withSecret })),
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
        responses: { '200': success('Removed.', object({ success: ok, message: { type: 'string' } })), ...apiErrors, '404': notFound },
      },
    },
    '/webhooks/{webhook_id}/rotate-secret': {
      parameters: [idParameter],
      post: {
        operationId: 'rotateWebhookSecret',
        summary: 'A new secret; the old one signs alongside for 24 hours',
        tags: ['webhooks'],
        security: API_KEY,
        responses: { '200': success('The webhook with its new secret.', object({ success: ok, webhook: withSecret })), ...apiErrors, '404': notFound },
      },
    },
    '/webhooks/{webhook_id}/deliveries': {
      parameters: [idParameter],
      get: {
        operationId: 'listWebhookDeliveries',
        summary: `The webhook's newest ${DELIVERIES_SHOWN} deliveries`,
        tags: ['webhooks'],
        security: API_KEY,
        responses: { '200': success('Newest first.', object({ success: ok, deliveries: { type: 'array', items: ref('schemas', 'WebhookDelivery') } })), ...apiErrors, '404': notFound },
      },
    },
  };
}
