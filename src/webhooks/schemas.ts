// Webhooks on the wire (issue 52, "the API described once"): the body that
// adds one, as src/http/webhook-routes.ts validates it; an endpoint and a
// delivery as the API shows them; and the events' bodies. src/openapi/
// documents these very schemas (the events as OpenAPI 3.1 `webhooks`).
import { z } from 'zod';
import { count, oneOf, optionalDate, wireDate } from '../wire-schemas.js';
import { EVENT_TYPES } from './events.js';

const eventType = z.enum(EVENT_TYPES);

/** The body of POST /webhooks. */
export const newWebhookSchema = z.strictObject({
  url: z.url({ protocol: /^https?$/ }).max(2048).meta({ override: { pattern: '^https?://' } }),
  // Omitted: every event type known now, stored as such, so the list shows what is sent.
  events: z.array(eventType).min(1).optional(),
});

const webhookFields = {
  webhook_id: z.string().regex(/^wh_[A-Za-z0-9_-]{16}$/).meta({ description: 'Identifier of the webhook; used in paths.' }),
  url: z.string().meta({ format: 'uri', description: 'Where events are POSTed.' }),
  events: z.array(eventType).min(1).meta({ uniqueItems: true, description: 'The event types it receives.' }),
  created_at: wireDate(),
  disabled: z.boolean().meta({ description: 'True once deliveries failed for WEBHOOK_RETRY_HOURS: nothing more is sent.' }),
  disabled_at: optionalDate('When it was disabled; null while enabled.'),
  paused_until: optionalDate('While its sends time out again and again: nothing is sent to it before this time, then one message at a time until it answers. Null otherwise.'),
};

/** A webhook endpoint of the account (without its secret). */
export const webhookSchema = z.strictObject(webhookFields).meta({ description: 'A webhook endpoint of the account.' });
export type WebhookAnswer = z.infer<typeof webhookSchema>;

/** A new or rotated webhook: with its signing secret, shown in this answer only. */
export const webhookWithSecretSchema = z.strictObject({
  ...webhookFields,
  secret: z.string().regex(/^whsec_[A-Za-z0-9+/]+=*$/).meta({ description: 'The signing secret (Standard Webhooks), shown in this answer only.' }),
});

/** One event's delivery to the webhook. */
export const deliverySchema = z
  .strictObject({
    message_id: z.string().regex(/^msg_[0-9a-f]{32}$/).meta({ description: 'The `webhook-id` header: the same on every try of this event.' }),
    type: eventType,
    status: z.enum(['pending', 'delivered', 'failed']),
    attempts: count('Tries so far.'),
    last_status: z.number().int().nullable().meta({ description: 'The receiver\'s last HTTP status; null when it did not answer.' }),
    last_error: z.string().nullable().meta({ description: 'Why the last try failed. A destination that is not a public address (after DNS) says `destination is not a public address`, never the address.' }),
    next_attempt_at: optionalDate('When it is tried next; null once delivered or given up.'),
    delivered_at: optionalDate('When a receiver answered 2xx.'),
    created_at: wireDate(),
  })
  .meta({ description: 'One event\'s delivery to the webhook.' });
export type DeliveryAnswer = z.infer<typeof deliverySchema>;

/** The file in an event's body: as the API shows it (without public_link), plus its SHA-256. */
const eventFile = z
  .strictObject({
    file_id: z.number().int().min(1).max(2147483647),
    filename: z.string(),
    size: count('Bytes.'),
    sha256: z.string().regex(/^[0-9a-f]{64}$/).nullable().meta({ description: 'Hex SHA-256 of the content; null for an upload straight to the store whose client declared none (docs/direct-uploads.md).' }),
    upload_date: wireDate(),
    download_count: count('Complete downloads, this one included for file.downloaded.'),
    expires_at: optionalDate('When the file expires; null: never.'),
    request_id: z.string().nullable().meta({ description: 'The file request it came through; null for the account\'s own uploads.' }),
  })
  .meta({ description: 'The file as the API shows it (without public_link), plus its SHA-256.' });

const envelope = <T extends z.ZodType>(type: string, data: T) =>
  z.strictObject({ type: z.literal(type), timestamp: z.string().meta({ format: 'date-time', description: 'When the event happened, RFC 3339.' }), data });

/** The body of each event type, by the component name the document gives it. */
export const eventSchemas = {
  FileEvent: oneOf([envelope('file.uploaded', eventFile), envelope('file.deleted', eventFile), envelope('file.downloaded', eventFile)]),
  LinkExhaustedEvent: envelope('link.exhausted', z.strictObject({ link_id: z.uuid(), max_downloads: z.number().int().min(1), download_count: count('The link\'s complete downloads.'), file: eventFile })),
  UploadExpiredEvent: envelope('upload.expired', z.strictObject({
    upload_id: z.string(),
    filename: z.string(),
    length: z.number().int().min(0).nullable().meta({ description: 'Upload-Length; null when it was deferred.' }),
    offset: count('Bytes it had received.'),
    created_at: wireDate(),
  })),
};

/** Which schema an event type's body has. */
export const eventSchemaOf = (type: (typeof EVENT_TYPES)[number]): keyof typeof eventSchemas =>
  type === 'link.exhausted' ? 'LinkExhaustedEvent' : type === 'upload.expired' ? 'UploadExpiredEvent' : 'FileEvent';
