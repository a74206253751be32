import { createHash, timingSafeEqual } from 'node:crypto';
import Router from '@koa/router';
import type { Middleware } from 'koa';
import { z } from 'zod';
import type { PlanService } from '../accounts/plans.js';
import type { Plan } from '../accounts/types.js';
import type { AccountService } from '../accounts/service.js';
import type { SweepResult } from '../files/sweeper.js';
import type { OrphanCheck } from '../files/orphans.js';
import type { FailureLimits } from '../limits/failure-limits.js';
import type { Metrics } from '../metrics.js';
import { AppError, badRequest } from '../errors.js';
import { pagination, parseListQuery } from '../http/list-query.js';
import { formatDate } from '../wire-date.js';
import { tooManyFailures } from '../http/rate-limit.js';
import { operator } from '../audit/actor.js';

export interface AdminDeps {
  accounts: AccountService;
  plans: PlanService;
  /** Served at /metrics, behind the same token. */
  metrics: Metrics;
  sweep: (graceSeconds?: number) => Promise<GcResult>;
  checkOrphans: (graceSeconds?: number) => Promise<OrphanCheckResult>;
}

/** What `dropstream gc` did: the sweep, and the accounts whose file counters were corrected. */
export type GcResult = SweepResult & { countersFixed: number };

/** What `dropstream gc --check` found. */
export type OrphanCheckResult = OrphanCheck;

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * The admin token, checked before anything else on every path (issue 27):
 * without it, every request is 401, so neither the body parser (400
 * invalid_json) nor the router (404 vs 405) says which routes exist.
 * Digests are compared, so neither the token's content nor its length leaks
 * through timing. Every try is counted against the address before the
 * token is compared, and given back when it was right (issue 38): over the
 * limit the address gets 429 whatever it sends, the right token included,
 * until the window ends, so neither a burst nor the answers to a
 * locked-out address tell a guesser anything (a token has 32 characters or
 * more, so the limit is about noise, not odds).
 */
export function requireAdminToken(token: string, failures?: FailureLimits, metrics?: Metrics): Middleware {
  const expected = digest(token);
  return async (ctx, next) => {
    const given = /^Bearer[ \t]+(\S+)$/i.exec(ctx.get('Authorization'))?.[1] ?? '';
    const wait = failures ? await failures.reserve(ctx.ip).catch(() => 0) : 0;
    if (wait > 0 && failures) throw tooManyFailures(failures, wait, metrics);
    if (!timingSafeEqual(digest(given), expected)) {
      throw new AppError('invalid_admin_token', 'A valid admin token is required', { 'WWW-Authenticate': 'Bearer' });
    }
    await failures?.refund(ctx.ip).catch(() => {});
    await next();
  };
}

function parse<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value ?? {});
  if (!result.success) {
    const issue = result.error.issues[0];
    throw badRequest('invalid_request', `${issue?.path.join('.') || 'body'}: ${issue?.message ?? 'invalid'}`);
  }
  return result.data;
}

const count = z.number().int().min(0).max(2_147_483_647);
const planName = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,31}$/, 'lower-case letters, digits, - and _ (at most 32)');
const planBody = z.strictObject({
  api_access: z.boolean().optional(),
  requests_per_minute: count.optional(),
  requests_per_day: count.optional(),
  max_file_size: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  daily_uploads: count.optional(),
  // null: no cap; 0 would refuse every upload, which api_access: false already says.
  concurrent_uploads: z.number().int().min(1).max(100_000).nullable().optional(),
  // null: no limit; 0 would refuse every upload.
  max_total_size: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).nullable().optional(),
  max_expires_in: z.number().int().min(1).max(2_147_483_647).nullable().optional(),
});
const accountBody = z.strictObject({ plan: planName, email: z.email().optional() });
const changePlanBody = z.strictObject({ plan: planName });
const accountId = z.string().regex(/^[0-9]{1,9}$/, 'must be a positive integer').transform(Number);

export const presentPlan = (plan: Plan) => ({
  name: plan.name,
  api_access: plan.apiAccess,
  requests_per_minute: plan.requestsPerMinute,
  requests_per_day: plan.requestsPerDay,
  max_file_size: plan.maxFileSize,
  daily_uploads: plan.dailyUploads,
  concurrent_uploads: plan.concurrentUploads,
  max_total_size: plan.maxTotalSize,
  max_expires_in: plan.maxExpiresIn,
});

/** Provisioning for the CLI and a website's backend, on its own listener. */
/** Behind requireAdminToken, which the admin app puts in front of everything. */
export function adminRoutes({ accounts, plans, metrics, sweep, checkOrphans }: AdminDeps) {
  const router = new Router();

  // Prometheus format; scrape it with the admin token as a bearer credential.
  router.get('/metrics', async (ctx) => {
    ctx.type = metrics.registry.contentType;
    ctx.body = await metrics.registry.metrics();
  });

  // One sweep now and a recount of the file counters; `grace_seconds` overrides GC_GRACE (0 after a known crash).
  // `check`: nothing is removed; the objects the sweep's walk would remove, over the whole store.
  router.post('/admin/gc', async (ctx) => {
    const body = parse(z.strictObject({ grace_seconds: count.optional(), check: z.boolean().optional() }), ctx.request.body);
    if (body.check) {
      const found = await checkOrphans(body.grace_seconds);
      ctx.body = {
        success: true,
        checked: found.checked,
        orphans_total: found.total,
        orphans: found.orphans.map((o) => ({ key: o.key, size: o.size, modified_at: formatDate(o.modified) })),
      };
      return;
    }
    const { countersFixed, ...swept } = await sweep(body.grace_seconds);
    ctx.body = { success: true, ...swept, counters_fixed: countersFixed };
  });

  router.get('/admin/plans', async (ctx) => {
    ctx.body = { success: true, plans: (await plans.list()).map(presentPlan) };
  });

  router.put('/admin/plans/:name', async (ctx) => {
    const name = parse(planName, ctx.params.name);
    const body = parse(planBody, ctx.request.body);
    const plan = await plans.set(name, {
      apiAccess: body.api_access,
      requestsPerMinute: body.requests_per_minute,
      requestsPerDay: body.requests_per_day,
      maxFileSize: body.max_file_size,
      dailyUploads: body.daily_uploads,
      concurrentUploads: body.concurrent_uploads,
      maxTotalSize: body.max_total_size,
      maxExpiresIn: body.max_expires_in,
    });
    ctx.body = { success: true, plan: presentPlan(plan) };
  });

  // Oldest first, paginated as GET /api/v1/files is (?page, ?limit up to 100).
  router.get('/admin/accounts', async (ctx) => {
    const { page, limit } = parseListQuery(ctx.query);
    const { accounts: rows, total } = await accounts.list(page, limit);
    ctx.body = {
      success: true,
      accounts: rows.map((row) => ({
        account_id: row.accountId,
        email: row.email,
        plan: row.plan,
        created_at: formatDate(row.createdAt),
        total_files: row.fileCount,
        total_size: row.totalBytes,
      })),
      pagination: pagination(page, limit, total),
    };
  });

  router.delete('/admin/plans/:name', async (ctx) => {
    await plans.remove(parse(planName, ctx.params.name));
    ctx.body = { success: true };
  });

  router.post('/admin/accounts', async (ctx) => {
    const body = parse(accountBody, ctx.request.body);
    const created = await accounts.create(body);
    ctx.status = 201;
    ctx.body = { success: true, account_id: created.accountId, plan: created.plan, api_key: created.apiKey };
  });

  router.patch('/admin/accounts/:id', async (ctx) => {
    const id = parse(accountId, ctx.params.id);
    const body = parse(changePlanBody, ctx.request.body);
    // The operator's change, for the account's audit trail (the admin listener's client, whole: it is the operator's machine).
    const changed = await accounts.changePlan(id, body.plan, operator(ctx.ip || null));
    ctx.body = { success: true, account_id: changed.accountId, plan: changed.plan };
  });

  router.delete('/admin/accounts/:id', async (ctx) => {
    await accounts.remove(parse(accountId, ctx.params.id));
    ctx.body = { success: true };
  });

  router.post('/admin/accounts/:id/keys', async (ctx) => {
    const rotated = await accounts.rotateKey(parse(accountId, ctx.params.id));
    ctx.status = 201;
    ctx.body = { success: true, account_id: rotated.accountId, api_key: rotated.apiKey };
  });

  return router;
}
