// The account's webhooks (issue 44): create, list, delete, rotate the secret,
// recent deliveries. Under /api/v1, behind the same guard as every route.
import type Router from '@koa/router';
import type { Delivery, WebhookEndpoint, WebhookEndpoints } from '../webhooks/endpoints.js';
import { webhookErrors } from '../webhooks/errors.js';
import { EVENT_TYPES } from '../webhooks/events.js';
import { newWebhookSchema, type DeliveryAnswer, type WebhookAnswer } from '../webhooks/schemas.js';
import type { AuthState } from './auth.js';
import type { Need } from './scoped.js';
import { jsonBody } from './json-body.js';
import { formatDate, formatOptionalDate } from '../wire-date.js';

export interface WebhookRouteDeps {
  webhooks: WebhookEndpoints;
  /** BODY_TIMEOUT in milliseconds. */
  bodyTimeoutMs: number;
}

function parseNewWebhook(body: unknown) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw webhookErrors.invalid('the body must be a JSON object');
  const result = newWebhookSchema.safeParse(body);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const field = String(issue.path[0] ?? '');
    if (issue.code === 'unrecognized_keys') throw webhookErrors.invalid(`unknown field "${issue.keys[0]!.slice(0, 64)}": a webhook takes url and events`);
    if (field === 'events') throw webhookErrors.invalid(`events must be a non-empty list of ${EVENT_TYPES.join(', ')}`);
    throw webhookErrors.invalid('url must be an http:// or https:// URL of at most 2048 characters');
  }
  return { url: result.data.url, events: [...new Set(result.data.events ?? EVENT_TYPES)] };
}

const presentWebhook = (endpoint: WebhookEndpoint): WebhookAnswer => ({
  webhook_id: endpoint.id,
  url: endpoint.url,
  events: endpoint.events,
  created_at: formatDate(endpoint.createdAt),
  disabled: endpoint.disabledAt !== null,
  disabled_at: formatOptionalDate(endpoint.disabledAt),
  paused_until: formatOptionalDate(endpoint.pausedUntil),
});

const presentDelivery = (delivery: Delivery): DeliveryAnswer => ({
  message_id: delivery.id,
  // Written from EVENT_TYPES only (src/webhooks/events.ts).
  type: delivery.type as DeliveryAnswer['type'],
  status: delivery.deliveredAt ? 'delivered' : delivery.nextAttemptAt ? 'pending' : 'failed',
  attempts: delivery.attempts,
  last_status: delivery.lastStatus,
  last_error: delivery.lastError,
  next_attempt_at: formatOptionalDate(delivery.nextAttemptAt),
  delivered_at: formatOptionalDate(delivery.deliveredAt),
  created_at: formatDate(delivery.createdAt),
});

export function webhookRoutes(router: Router<AuthState>, need: Need, { webhooks, bodyTimeoutMs }: WebhookRouteDeps): void {
  const body = jsonBody({ limit: '16kb', invalid: () => webhookErrors.invalid('the body must be a JSON object'), timeoutMs: bodyTimeoutMs });
  router.post('/webhooks', need('webhooks:write'), body, async (ctx) => {
    const { url, events } = parseNewWebhook(ctx.request.body ?? {});
    const { secret, ...endpoint } = await webhooks.create(ctx.state.caller.accountId, url, events, ctx.state.caller.actor);
    ctx.status = 201;
    ctx.body = { success: true, webhook: { ...presentWebhook(endpoint), secret } };
  });

  router.get('/webhooks', need('webhooks:write'), async (ctx) => {
    const endpoints = await webhooks.list(ctx.state.caller.accountId);
    ctx.body = { success: true, webhooks: endpoints.map(presentWebhook) };
  });

  router.delete('/webhooks/:id', need('webhooks:write'), async (ctx) => {
    await webhooks.delete(ctx.state.caller.accountId, ctx.params.id!, ctx.state.caller.actor);
    ctx.body = { success: true, message: 'Webhook deleted' };
  });

  router.post('/webhooks/:id/rotate-secret', need('webhooks:write'), async (ctx) => {
    const { secret, ...endpoint } = await webhooks.rotateSecret(ctx.state.caller.accountId, ctx.params.id!, ctx.state.caller.actor);
    ctx.body = { success: true, webhook: { ...presentWebhook(endpoint), secret } };
  });

  router.get('/webhooks/:id/deliveries', need('webhooks:write'), async (ctx) => {
    const deliveries = await webhooks.deliveries(ctx.state.caller.accountId, ctx.params.id!);
    ctx.body = { success: true, deliveries: deliveries.map(presentDelivery) };
  });
}
