// The account's webhooks (issue 44): create, list, delete, rotate the secret,
// recent deliveries. Under /api/v1, behind the same guard as every route.
import Router from '@koa/router';
import type { Delivery, WebhookEndpoint, WebhookEndpoints } from './endpoints.js';
import { webhookErrors } from './errors.js';
import { EVENT_TYPES } from './events.js';
import { newWebhookSchema, type DeliveryAnswer, type WebhookAnswer } from './schemas.js';
import type { AuthState } from '../http/auth.js';
import type { Need } from '../http/scoped.js';
import { jsonBody } from '../http/json-body.js';
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

/** The account's webhook endpoints, mounted at /api/v1/webhooks. */
export function webhookRoutes(need: Need, { webhooks, bodyTimeoutMs }: WebhookRouteDeps): Router<AuthState> {
  const router = new Router<AuthState>();
  const body = jsonBody({ limit: '16kb', invalid: () => webhookErrors.invalid('the body must be a JSON object'), timeoutMs: bodyTimeoutMs });
  router.post('/', need('webhooks:write'), body, async (ctx) => {
    const { url, events } = parseNewWebhook(ctx.request.body ?? {});
    const { secret, ...endpoint } = await webhooks.create(ctx.state.caller.accountId, url, events, ctx.state.caller.actor);
    ctx.status = 201;
    ctx.body = { success: true, webhook: { ...presentWebhook(endpoint), secret } };
  });

  router.get('/', need('webhooks:write'), async (ctx) => {
    const endpoints = await webhooks.list(ctx.state.caller.accountId);
    ctx.body = { success: true, webhooks: endpoints.map(presentWebhook) };
  });

  router.delete('/:id', need('webhooks:write'), async (ctx) => {
    await webhooks.delete(ctx.state.caller.accountId, ctx.params.id!, ctx.state.caller.actor);
    ctx.body = { success: true, message: 'Webhook deleted' };
  });

  router.post('/:id/rotate-secret', need('webhooks:write'), async (ctx) => {
    const { secret, ...endpoint } = await webhooks.rotateSecret(ctx.state.caller.accountId, ctx.params.id!, ctx.state.caller.actor);
    ctx.body = { success: true, webhook: { ...presentWebhook(endpoint), secret } };
  });

  router.get('/:id/deliveries', need('webhooks:write'), async (ctx) => {
    const deliveries = await webhooks.deliveries(ctx.state.caller.accountId, ctx.params.id!);
    ctx.body = { success: true, deliveries: deliveries.map(presentDelivery) };
  });
  return router;
}
