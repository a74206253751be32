// The composition root: config in, running listeners out. Only this module
// builds objects; everything else receives what it needs.
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { pino, type Logger } from 'pino';
import { PlanService } from './accounts/plans.js';
import { AccountService } from './accounts/service.js';
import { resolveAdminToken } from './admin-token.js';
import { createAdminApp, createApp, type Readiness } from './app.js';
import type { Config } from './config.js';
import { openDatabase, type Database } from './db/client.js';
import { UploadQuota } from './files/quota.js';
import { FileService } from './files/service.js';
import { UploadGate } from './files/upload-gate.js';
import { FailureLimits } from './limits/failure-limits.js';
import { connectRedis, redisReady } from './limits/redis.js';
import { RequestLimits } from './limits/request-limits.js';
import { LocalObjectStore } from './storage/local.js';
import type { ObjectStore } from './storage/object-store.js';
import { S3ObjectStore } from './storage/s3.js';

export interface RunningServer {
  /** Address of the public listener (the port is real when config asked for 0). */
  url: string;
  adminUrl: string;
  adminToken: string;
  db: Database;
  close(): Promise<void>;
}

export function createLogger(level: Config['logLevel']): Logger {
  return pino({ level, base: undefined });
}

async function listen(server: Server, port: number, host: string): Promise<string> {
  server.listen(port, host);
  await once(server, 'listening');
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${shownHost}:${address.port}`;
}

async function checkReadiness(db: Database, store: ObjectStore, redis: Redis | undefined): Promise<Readiness> {
  const probe = (work: Promise<unknown>) =>
    Promise.race([work.then(() => 'ok' as const), new Promise<'down'>((r) => setTimeout(() => r('down'), 2000).unref())]).catch(
      () => 'down' as const,
    );
  const [database, objects] = await Promise.all([probe(db.prisma.$queryRawUnsafe('SELECT 1')), probe(store.head('readyz-probe'))]);
  const checks: Readiness['checks'] = {
    database,
    store: objects,
    redis: redis ? (redisReady(redis) ? 'ok' : 'degraded') : 'off',
  };
  return { ready: database === 'ok' && objects === 'ok', checks };
}

async function openStore(config: Config): Promise<ObjectStore> {
  if (!config.s3) return new LocalObjectStore({ root: join(config.dataDir, 'objects') });
  const store = new S3ObjectStore(config.s3);
  await store.ensureBucket();
  return store;
}

export async function startServer(config: Config, logger = createLogger(config.logLevel)): Promise<RunningServer> {
  let redis: Redis | undefined;
  const db = await openDatabase({ url: config.databaseUrl, pgliteDir: config.databaseUrl ? undefined : join(config.dataDir, 'pglite') });
  try {
    const applied = await db.migrate();
    if (applied.length) logger.info({ migrations: applied }, 'applied migrations');
    const store = await openStore(config);
    const onCleanupError = (err: unknown) => logger.error({ err }, 'clean-up failed');
    const accounts = new AccountService(db.prisma);
    const plans = new PlanService(db.prisma);
    const files = new FileService({ prisma: db.prisma, store, quota: new UploadQuota(db.prisma), onCleanupError });
    const adminToken = await resolveAdminToken(config.adminToken, config.dataDir);

    const uploadGate = new UploadGate(config.uploadConcurrency);
    redis = config.redisUrl ? connectRedis(config.redisUrl, logger) : undefined;
    const app = createApp({
      accounts,
      files,
      store,
      uploadGate,
      requestLimits: new RequestLimits({ redis, keyPrefix: config.redisKeyPrefix }),
      authFailures: new FailureLimits({ redis, keyPrefix: config.redisKeyPrefix, name: 'auth', failures: config.authFailureLimit, windowSeconds: 60 }),
      tokenFailures: new FailureLimits({ redis, keyPrefix: config.redisKeyPrefix, name: 'link', failures: config.linkFailureLimit, windowSeconds: 60 }),
      logger,
      publicUrl: config.publicUrl,
      trustProxy: config.trustProxy,
      readiness: () => checkReadiness(db, store, redis),
    });
    const adminApp = createAdminApp({ accounts, plans, logger, adminToken });
    const server = createServer(app.callback());
    const adminServer = createServer(adminApp.callback());
    const url = await listen(server, config.port, config.host);
    const adminUrl = await listen(adminServer, config.adminPort, config.adminHost);
    logger.info(
      { url, adminUrl, database: db.kind, store: config.s3 ? 's3' : 'local', publicUrl: config.publicUrl },
      'dropstream listening',
    );

    return {
      url,
      adminUrl,
      adminToken,
      db,
      async close() {
        server.closeIdleConnections();
        adminServer.closeIdleConnections();
        await Promise.all([
          new Promise((resolve) => server.close(resolve)),
          new Promise((resolve) => adminServer.close(resolve)),
        ]);
        await store.close?.();
        redis?.disconnect();
        await db.close();
      },
    };
  } catch (err) {
    redis?.disconnect();
    await db.close();
    throw err;
  }
}
