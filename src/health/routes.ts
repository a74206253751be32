import Router from '@koa/router';
import { buildInfo } from '../version.js';
import type { Readiness } from './readiness.js';

/** Probed every few seconds by load balancers and HEALTHCHECKs: kept out of the info-level request log. */
export const HEALTH_PATHS = ['/healthz', '/readyz'] as const;

/**
 * /healthz: the process answers, with the version it runs (what a rolling
 * upgrade watches for behind the proxy). /readyz: the dependencies answer; 503 names
 * what is down. Redis down is "degraded", not down: limits then hold per
 * instance and the API keeps working.
 */
export function healthRoutes(readiness: () => Promise<Readiness>) {
  const router = new Router();
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok', version: buildInfo().version };
  });
  router.get('/readyz', async (ctx) => {
    const { ready, checks } = await readiness();
    const degraded = Object.values(checks).includes('degraded');
    ctx.status = ready ? 200 : 503;
    ctx.body = { status: ready ? (degraded ? 'degraded' : 'ok') : 'unavailable', checks };
  });
  return router;
}
