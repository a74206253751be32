// What /readyz answers (health-routes.ts) and the composition root checks
// (server.ts), apart from app.ts so that health-routes need not import the
// app that imports it.

/** Readiness of the dependencies: whether the API can work, and each check. */
export interface Readiness {
  /** false when a dependency the API cannot work without is down. */
  ready: boolean;
  checks: Record<string, 'ok' | 'down' | 'degraded' | 'off'>;
}
