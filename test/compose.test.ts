// The deployment files, read as docker and compose read them: docker-compose.yml
// (interpolated from .env.example), the Caddyfile, the Dockerfile and
// .dockerignore. No Docker engine needed. The stack itself runs in CI with
// stand-in images (test/compose-stack, .ci/compose-stack), and the image
// alone in the Docker smoke test (test/docker/image.smoke.ts, .ci/docker-smoke).
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { parse } from 'yaml';
import { configVariables, loadConfig } from '../src/config.js';
import { createListener } from '../src/listener.js';

const read = (name: string) => readFileSync(new URL(`../${name}`, import.meta.url), 'utf8');

interface Service {
  image?: string;
  build?: unknown;
  command?: string | string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  ports?: (string | { target: number; published?: string | number; host_ip?: string })[];
  expose?: (string | number)[];
  container_name?: string;
  volumes?: (string | { type?: string; source?: string; target: string })[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: { test?: string | string[]; disable?: boolean };
  stop_grace_period?: string;
}
interface ComposeFile {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

const compose = parse(read('docker-compose.yml')) as ComposeFile;
const services = compose.services;
const service = (name: string): Service => {
  const found = services[name];
  if (!found) expect.fail(`docker-compose.yml has no service ${name}`);
  return found;
};

/** KEY=VALUE lines of an env file; comments and blank lines skipped. */
function parseEnvFile(text: string): Record<string, string> {
  const entries = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => {
      const eq = line.indexOf('=');
      expect(eq, `env file line without "=": ${line}`).to.be.greaterThan(0);
      return [line.slice(0, eq), line.slice(eq + 1).replace(/^(['"])(.*)\1$/, '$2')] as const;
    });
  return Object.fromEntries(entries);
}
const exampleEnv = parseEnvFile(read('.env.example'));
/** .env as an operator leaves it: every "change me" value changed (the app refuses the placeholders themselves). */
const operatorEnv = Object.fromEntries(Object.entries(exampleEnv).map(([name, value]) => [name, value.replace('change-me', 'changed')]));

// Compose interpolation: $$ is a literal $; $VAR, ${VAR}, ${VAR:-default},
// ${VAR-default}, ${VAR:?error}, ${VAR?error}, ${VAR:+other}, ${VAR+other}.
const reference = /\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))/g;

function interpolate(text: string, env: Record<string, string>): string {
  return text
    .split('$$')
    .map((part) =>
      part.replace(reference, (_match, braced?: string, colon?: string, op?: string, arg = '', bare?: string) => {
        const name = (braced ?? bare) as string;
        const value = env[name];
        const unset = colon ? !value : value === undefined;
        if (op === '-') return unset ? arg : (value as string);
        if (op === '+') return unset ? '' : arg;
        if (op === '?' && unset) throw new Error(`${name} is required: ${arg}`);
        return value ?? '';
      }),
    )
    .join('$');
}

/** Names of the variables a string reads (`$$` is not a reference). */
const referencedNames = (text: string) => text.split('$$').flatMap((part) => [...part.matchAll(reference)].map((m) => (m[1] ?? m[5]) as string));

/** Every string in a parsed YAML value (compose interpolates values, never keys). */
const stringsIn = (value: unknown): string[] =>
  typeof value === 'string' ? [value] : value && typeof value === 'object' ? Object.values(value).flatMap(stringsIn) : [];

/** A service's environment as compose passes it, interpolated from .env.example. */
function environmentOf(name: string, svc: Service = service(name)): Record<string, string> {
  const env = svc.environment ?? {};
  const pairs = Array.isArray(env)
    ? env.map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)])
    : Object.entries(env).map(([key, value]) => [key, value === null ? '' : String(value)]);
  return Object.fromEntries(pairs.map(([key, value]) => [key, interpolate(value as string, operatorEnv)]));
}

/** Seconds in a Go-style duration (compose and MinIO): 45s, 1m30s, 24h. */
function seconds(duration: string): number {
  expect(duration, `not a duration: ${duration}`).to.match(/^(\d+(\.\d+)?(h|m|s|ms))+$/);
  const unit: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 0.001 };
  return [...duration.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s)/g)].reduce((sum, m) => sum + Number(m[1]) * (unit[m[2] as string] as number), 0);
}

function namedVolumes(svc: Service): { source: string; target: string }[] {
  return (svc.volumes ?? [])
    .map((v) => (typeof v === 'string' ? { source: v.split(':')[0] ?? '', target: v.split(':')[1] ?? '' } : { source: v.source ?? '', target: v.target }))
    .filter((v) => /^[A-Za-z0-9][\w.-]*$/.test(v.source));
}

function publishedPorts(svc: Service): { hostIp: string; container: number }[] {
  return (svc.ports ?? []).map((port) => {
    if (typeof port !== 'string') return { hostIp: port.host_ip ?? '', container: port.target };
    const parts = port.replace(/\/(tcp|udp)$/, '').split(':');
    return { hostIp: parts.length === 3 ? (parts[0] as string) : '', container: Number(parts[parts.length - 1]) };
  });
}

/** Every volume of a service as source and target (bind mounts included). */
function namedOrBound(svc: Service): { source: string; target: string }[] {
  return (svc.volumes ?? []).map((v) =>
    typeof v === 'string' ? { source: v.split(':')[0] ?? '', target: v.split(':')[1] ?? '' } : { source: v.source ?? '', target: v.target },
  );
}

/** The Caddyfile's sites (`:port { ... }`), each with its one dynamic upstream (`dynamic a name port`). */
const caddyfile = read('Caddyfile');
const caddySites = [...caddyfile.matchAll(/^:(\d+) \{\n([\s\S]*?)\n\}$/gm)].map(([, port, body = '']) => {
  const upstream = /dynamic a (\S+) (\d+)/.exec(body);
  return { port: Number(port), upstream: upstream ? `${upstream[1]}:${upstream[2]}` : '', body };
});

describe('docker-compose.yml', () => {
  it('when the file is parsed, then it defines proxy, app, postgres, redis, minio and minio-init', () => {
    expect(Object.keys(services)).to.have.members(['proxy', 'app', 'postgres', 'redis', 'minio', 'minio-init']);
  });

  it('when a service keeps running, then it has a healthcheck with a test command', () => {
    for (const [name, svc] of Object.entries(services).filter(([name]) => name !== 'minio-init')) {
      const test = svc.healthcheck?.test;
      expect(svc.healthcheck?.disable, name).to.not.equal(true);
      expect(test, `${name} healthcheck.test`).to.be.an('array');
      expect((test as string[])[0], name).to.be.oneOf(['CMD', 'CMD-SHELL']);
      expect((test as string[]).slice(1).join(' ').trim(), name).to.not.equal('');
    }
  });

  it('when the app starts, then postgres and redis are healthy and minio-init has completed', () => {
    expect(service('app').depends_on).to.deep.equal({
      postgres: { condition: 'service_healthy' },
      redis: { condition: 'service_healthy' },
      'minio-init': { condition: 'service_completed_successfully' },
    });
    expect(service('minio-init').depends_on).to.deep.equal({ minio: { condition: 'service_healthy' } });
  });

  it('when a service pulls an image, then its tag pins a major version or a release, never latest', () => {
    const pulled = Object.entries(services).filter(([, svc]) => !svc.build);
    expect(pulled.length).to.equal(5);
    for (const [name, svc] of pulled) {
      const image = svc.image ?? '';
      const tag = image.lastIndexOf(':') > image.lastIndexOf('/') ? image.slice(image.lastIndexOf(':') + 1) : '';
      expect(tag, `${name}: ${image}`).to.match(/^(\d+([.-]|$)|RELEASE\.\d{4}-\d\d-\d\dT)/);
    }
  });

  it('when a service stores data, then on a declared named volume, and every declared volume is used', () => {
    const mounts = Object.fromEntries(Object.entries(services).map(([name, svc]) => [name, namedVolumes(svc)]));
    expect(mounts.app?.map((v) => v.target)).to.include('/data');
    expect(mounts.postgres?.map((v) => v.target)).to.include('/var/lib/postgresql/data');
    expect(mounts.minio?.map((v) => v.target)).to.include('/data');
    const used = new Set(Object.values(mounts).flatMap((list) => list.map((v) => v.source)));
    expect([...used]).to.have.members(Object.keys(compose.volumes ?? {}));
  });

  it('when the app gets its environment, then every variable is one the server reads', () => {
    const keys = Object.keys(environmentOf('app'));
    expect(keys).to.include.members(['DATABASE_URL', 'REDIS_URL', 'S3_ENDPOINT', 'S3_BUCKET', 'ADMIN_HOST']);
    expect(configVariables).to.include.members(keys);
  });

  it('when .env.example is used as it is, with its placeholder secrets, then the app refuses to start naming them (issue 21)', () => {
    const pairs = Object.entries(service('app').environment as Record<string, string | null>).map(([key, value]) => [key, interpolate(value === null ? '' : String(value), exampleEnv)]);
    expect(() => loadConfig(Object.fromEntries(pairs))).to.throw(/S3_SECRET_ACCESS_KEY: is still the .env.example placeholder[\s\S]*DATABASE_URL: has the .env.example placeholder/);
  });

  it('when the environment comes from .env.example with its "change me" values changed, then the server accepts it and reaches the compose services', () => {
    const env = environmentOf('app');
    const config = loadConfig(env);
    const database = new URL(config.databaseUrl ?? '');
    expect(database.hostname).to.equal('postgres');
    const postgres = environmentOf('postgres');
    expect([database.username, database.password, database.pathname]).to.deep.equal([
      postgres.POSTGRES_USER,
      postgres.POSTGRES_PASSWORD,
      `/${postgres.POSTGRES_DB}`,
    ]);
    expect(new URL(config.redisUrl ?? '').hostname).to.equal('redis');
    expect(new URL(config.s3?.endpoint ?? '').hostname).to.equal('minio');
    expect(config.s3?.forcePathStyle).to.equal(true);
    expect(config.adminHost).to.equal('0.0.0.0');
    const init = environmentOf('minio-init');
    expect([init.S3_BUCKET, init.S3_ACCESS_KEY_ID, init.S3_SECRET_ACCESS_KEY]).to.deep.equal([
      config.s3?.bucket,
      config.s3?.credentials?.accessKeyId,
      config.s3?.credentials?.secretAccessKey,
    ]);
    expect(init.S3_ACCESS_KEY_ID).to.not.equal(environmentOf('minio').MINIO_ROOT_USER);
  });

  it('when compose interpolates a variable, then .env.example defines it, and defines nothing else', () => {
    const used = new Set(stringsIn(compose).flatMap(referencedNames));
    expect(used.size).to.be.greaterThan(5);
    expect(Object.keys(exampleEnv)).to.have.members([...used]);
  });

  it('when a secret is needed, then compose has no default for it and .env.example says change me', () => {
    const secrets = Object.keys(exampleEnv).filter((name) => /PASSWORD|SECRET|TOKEN/.test(name));
    expect(secrets).to.include.members(['POSTGRES_PASSWORD', 'MINIO_ROOT_PASSWORD', 'S3_SECRET_ACCESS_KEY', 'ADMIN_TOKEN']);
    const defaults = stringsIn(compose).flatMap((text) => [...text.matchAll(/\$\{([A-Za-z0-9_]+):?-([^}]*)\}/g)]);
    for (const name of secrets) {
      expect(exampleEnv[name], name).to.satisfy((value: string) => value === '' || value.includes('change-me'));
      for (const [, variable, fallback] of defaults) if (variable === name) expect(fallback, `default of ${name}`).to.equal('');
    }
  });

  it('when ports are published, then only the public API listens beyond the host loopback, the admin API on it', () => {
    const open = Object.entries(services).flatMap(([name, svc]) =>
      publishedPorts(svc).filter((p) => p.hostIp !== '127.0.0.1').map((p) => `${name}:${p.container}`),
    );
    expect(open).to.deep.equal(['proxy:3000']);
    expect(publishedPorts(service('proxy'))).to.deep.include({ hostIp: '127.0.0.1', container: 3001 });
  });

  it('when the app is scaled (--scale app=3), then no replica claims a host port or a container name', () => {
    const app = service('app');
    expect(app.ports ?? []).to.deep.equal([]);
    expect(app.container_name).to.equal(undefined);
    const config = loadConfig(environmentOf('app'));
    expect((app.expose ?? []).map(Number)).to.have.members([config.port, config.adminPort]);
  });

  it('when requests reach the proxy, then it spreads them over every replica of app, on the ports the app listens on', () => {
    const config = loadConfig(environmentOf('app'));
    const proxy = service('proxy');
    expect(namedOrBound(proxy)).to.deep.include({ source: './Caddyfile', target: '/etc/caddy/Caddyfile' });
    expect(proxy.depends_on).to.deep.equal({ app: { condition: 'service_healthy' } });
    const published = publishedPorts(proxy).map((p) => p.container);
    // Each published port is a Caddy site whose upstreams are every address of `app` (Docker's DNS gives one per replica).
    expect(caddySites.map((site) => [site.port, site.upstream])).to.deep.equal([
      [published[0], `app:${config.port}`],
      [published[1], `app:${config.adminPort}`],
    ]);
    for (const site of caddySites) {
      expect(site.body, `site :${site.port}`).to.match(/lb_try_duration \d+s/);
      expect(site.body, `site :${site.port}`).to.match(/refresh \d+s/);
    }
  });

  it('when the proxy reuses a connection to a replica, then it drops idle ones before the app does', () => {
    const appKeepAliveMs = createListener(() => {}, { headersSeconds: 20, idleSeconds: 60 }).keepAliveTimeout;
    for (const site of caddySites) {
      const keepalive = /keepalive (\d+)s/.exec(site.body)?.[1];
      expect(Number(keepalive) * 1000, `site :${site.port} keepalive`).to.be.below(appKeepAliveMs);
    }
  });

  it('when the app is behind the proxy, then it takes the client address from X-Forwarded-For', () => {
    expect(loadConfig(environmentOf('app')).trustProxy).to.equal(true);
  });

  it('when the proxy is stopped, then docker waits longer than Caddy\'s grace period', () => {
    const grace = /grace_period (\d+s)/.exec(caddyfile)?.[1] ?? expect.fail('no grace_period in Caddyfile');
    expect(seconds(service('proxy').stop_grace_period ?? '10s')).to.be.greaterThan(seconds(grace));
  });

  it('when compose checks PostgreSQL, then over TCP as the app connects, not the Unix socket', () => {
    const test = (service('postgres').healthcheck?.test as string[]).join(' ');
    expect(test).to.match(/pg_isready -h 127\.0\.0\.1 /);
  });

  it('when the app is stopped, then docker waits longer than SHUTDOWN_TIMEOUT before killing it', () => {
    const timeout = Number(environmentOf('app').SHUTDOWN_TIMEOUT ?? 30);
    expect(seconds(service('app').stop_grace_period ?? '10s')).to.be.greaterThan(timeout);
  });

  it('when an upload is left incomplete, then minio removes it after an expiry no shorter than the S3 rule or a resumable upload\'s life', () => {
    const minio = environmentOf('minio');
    const expiry = seconds(minio.MINIO_API_STALE_UPLOADS_EXPIRY ?? '');
    const config = loadConfig(environmentOf('app'));
    expect(expiry).to.be.at.least(config.s3?.abortIncompleteDays ? config.s3.abortIncompleteDays * 86_400 : 7 * 86_400);
    expect(expiry).to.be.at.least(config.resumableExpiry);
    expect(seconds(minio.MINIO_API_STALE_UPLOADS_CLEANUP_INTERVAL ?? '')).to.be.within(60, expiry);
  });

  it('when minio-init runs, then its script reads only its own environment and grants the app the bucket', () => {
    const command = service('minio-init').command;
    const script = interpolate(Array.isArray(command) ? command.join(' ') : (command ?? ''), operatorEnv);
    const env = environmentOf('minio-init');
    expect(Object.keys(env)).to.include.members(referencedNames(script));
    expect(script).to.include('mc mb --ignore-existing "local/$S3_BUCKET"');
    expect(script).to.include('mc admin user add local "$S3_ACCESS_KEY_ID" "$S3_SECRET_ACCESS_KEY"');
    const heredoc = /<<EOF\n([\s\S]*?)\nEOF\n/.exec(script)?.[1] ?? '';
    const policy = JSON.parse(heredoc.replace(/\$(\w+)/g, (_m, name: string) => env[name] ?? '')) as { Statement: { Resource: string[] }[] };
    expect(policy.Statement.flatMap((s) => s.Resource)).to.have.members([`arn:aws:s3:::${env.S3_BUCKET}`, `arn:aws:s3:::${env.S3_BUCKET}/*`]);
  });
});

/** Dockerfile instructions (continuations joined, comments dropped), grouped by stage. */
function dockerStages(text: string): { from: string; name?: string; lines: [string, string][] }[] {
  const instructions = text
    .replace(/\\\r?\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => [line.split(/\s/)[0]?.toUpperCase() ?? '', line.slice(line.search(/\s/) + 1).trim()] as [string, string]);
  const stages: { from: string; name?: string; lines: [string, string][] }[] = [];
  for (const [op, args] of instructions) {
    if (op === 'FROM') {
      const [from = '', as, name] = args.split(/\s+/);
      stages.push({ from, name: as?.toUpperCase() === 'AS' ? name : undefined, lines: [] });
    } else stages.at(-1)?.lines.push([op, args]);
  }
  return stages;
}

describe('docker-compose.offload.yml (opt-in: downloads served by MinIO through the proxy)', () => {
  const offload = (parse(read('docker-compose.offload.yml')) as ComposeFile).services;
  /** The environment with the override added (compose merges environment maps key by key). */
  const merged = (name: string) => ({ ...environmentOf(name), ...environmentOf(name, offload[name] ?? expect.fail(`no ${name} in the override`)) });
  const route = read('caddy/s3-offload.caddy');

  it('when the override is added, then the server accepts it and signs download URLs for PUBLIC_URL, the address clients reach', () => {
    const config = loadConfig(merged('app'));
    expect(config.s3?.presign?.publicEndpoint).to.equal(operatorEnv.PUBLIC_URL);
    expect(config.s3?.endpoint, 'the app itself still talks to minio').to.equal('http://minio:9000');
  });

  it('when the override is added, then the proxy mounts the route where the public site imports it, for the bucket the app signs in', () => {
    const [publicSite] = caddySites;
    const glob = /^\s*import (\S+)\/\*\.caddy$/m.exec(publicSite?.body ?? '')?.[1] ?? expect.fail('no `import DIR/*.caddy` in the :3000 site');
    expect(namedOrBound(offload.proxy!)).to.deep.equal([{ source: './caddy/s3-offload.caddy', target: `/etc/caddy/${glob}/s3-offload.caddy` }]);
    expect(merged('proxy').S3_BUCKET).to.equal(loadConfig(merged('app')).s3?.bucket);
    expect(route).to.include('path /{$S3_BUCKET}/*').and.include('reverse_proxy minio:9000');
  });

  it('when the override is not added, then nothing is mounted where the Caddyfile imports routes, and the app keeps every download', () => {
    expect(namedOrBound(service('proxy')).map((v) => v.target).filter((t) => t.startsWith('/etc/caddy/') && t !== '/etc/caddy/Caddyfile')).to.deep.equal([]);
    expect(loadConfig(environmentOf('app')).s3?.presign).to.equal(undefined);
  });

  it('when the route matches, then only a signed GET of an object: no other method, no listing of the bucket', () => {
    const matcher = /@presigned_download \{\n([\s\S]*?)\n\}/.exec(route)?.[1] ?? expect.fail('no @presigned_download matcher');
    expect(matcher.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))).to.deep.equal([
      'method GET', 'path /{$S3_BUCKET}/*', 'not path /{$S3_BUCKET}/', 'query X-Amz-Signature=*',
    ]);
    expect(route).to.match(/^handle @presigned_download \{/m);
  });
});

describe('docker-compose.direct.yml (opt-in: uploads sent straight to MinIO through the proxy)', () => {
  const direct = (parse(read('docker-compose.direct.yml')) as ComposeFile).services;
  const merged = (name: string) => ({ ...environmentOf(name), ...environmentOf(name, direct[name] ?? expect.fail(`no ${name} in the override`)) });
  const route = read('caddy/s3-direct.caddy');

  it('when the override is added, then the server accepts it and signs part URLs for PUBLIC_URL, the address clients reach', () => {
    const config = loadConfig(merged('app'));
    expect(config.s3?.direct?.publicEndpoint).to.equal(operatorEnv.PUBLIC_URL);
    expect(config.s3?.endpoint, 'the app itself still talks to minio').to.equal('http://minio:9000');
  });

  it('when the override is added, then the proxy mounts the route where the public site imports it, for the bucket the app signs in', () => {
    const [publicSite] = caddySites;
    const glob = /^\s*import (\S+)\/\*\.caddy$/m.exec(publicSite?.body ?? '')?.[1] ?? expect.fail('no `import DIR/*.caddy` in the :3000 site');
    expect(namedOrBound(direct.proxy!)).to.deep.equal([{ source: './caddy/s3-direct.caddy', target: `/etc/caddy/${glob}/s3-direct.caddy` }]);
    expect(merged('proxy').S3_BUCKET).to.equal(loadConfig(merged('app')).s3?.bucket);
  });

  it('when the route matches, then only a signed PUT of a part of an upload: no other method, no listing, no whole object', () => {
    const matcher = /@presigned_part \{\n([\s\S]*?)\n\}/.exec(route)?.[1] ?? expect.fail('no @presigned_part matcher');
    expect(matcher.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))).to.deep.equal([
      'method PUT', 'path /{$S3_BUCKET}/*', 'not path /{$S3_BUCKET}/',
      // All three keys (AND): Caddy's query matcher alone takes any one of them.
      'expression `{query.X-Amz-Signature} != "" && {query.partNumber} != "" && {query.uploadId} != ""`',
    ]);
    expect(route).to.match(/^handle @presigned_part \{\n[\s\S]*reverse_proxy minio:9000\n\}/m);
  });
});

describe('Dockerfile', () => {
  const stages = dockerStages(read('Dockerfile'));
  const runtime = stages.at(-1) ?? expect.fail('no FROM');
  const last = (op: string) => runtime.lines.filter(([o]) => o === op).at(-1)?.[1] ?? '';
  const nodeMajor = (image: string) => /^node:(\d+)[.-]/.exec(image)?.[1];

  it('when the image is built, then a build stage and a runtime stage share one Node major', () => {
    expect(stages.length).to.be.at.least(2);
    expect(nodeMajor(stages[0]?.from ?? '')).to.match(/^\d+$/);
    expect(nodeMajor(runtime.from)).to.equal(nodeMajor(stages[0]?.from ?? ''));
    const fromBuild = runtime.lines.filter(([op, args]) => op === 'COPY' && args.split(/\s+/).includes(`--from=${stages[0]?.name}`));
    expect(fromBuild).to.not.be.empty;
  });

  it('when the container runs, then as a user other than root', () => {
    expect(last('USER')).to.not.match(/^(|root|0)(:.*)?$/);
  });

  it('when the container runs, then docker checks /healthz with node, as compose does', () => {
    const check = /CMD\s+(\[.*\])$/.exec(last('HEALTHCHECK'))?.[1] ?? '[]';
    const command = JSON.parse(check) as string[];
    expect(command[0]).to.equal('node');
    expect(command.join(' ')).to.include('/healthz');
    expect(service('app').healthcheck?.test).to.deep.equal(['CMD', ...command]);
  });

  it('when the container starts, then it runs dropstream.js serve', () => {
    expect(JSON.parse(last('CMD') || '[]')).to.deep.equal(['node', 'bin/dropstream.js', 'serve']);
  });

  it('when the runtime stage is assembled, then it holds what serve loads and the allocator settings the launcher sets', () => {
    const copied = runtime.lines.filter(([op]) => op === 'COPY').map(([, args]) => args.split(/\s+/).at(-1));
    expect(copied).to.include.members(['./node_modules', './dist', './prisma', './bin', './package.json']);
    const env = runtime.lines.filter(([op]) => op === 'ENV').map(([, args]) => args).join(' ');
    for (const setting of ['NODE_ENV=production', 'MALLOC_ARENA_MAX=2', 'MALLOC_MMAP_THRESHOLD_=65536', 'HOST=0.0.0.0', 'DATA_DIR=/data']) {
      expect(env).to.include(setting);
    }
  });

  it("when the image is built, then its version label is package.json's version and its revision the REVISION argument", () => {
    const text = read('Dockerfile');
    const version = /^ARG VERSION=(\S+)$/m.exec(text)?.[1];
    expect(version, "the Dockerfile's ARG VERSION default").to.equal(JSON.parse(read('package.json')).version);
    const label = runtime.lines.filter(([op]) => op === 'LABEL').map(([, args]) => args).join(' ');
    expect(label).to.include('org.opencontainers.image.version="$VERSION"').and.include('org.opencontainers.image.revision="$REVISION"');
    const build = (stages[0]?.lines ?? []).find(([op, args]) => op === 'RUN' && args.includes('npm run build'))?.[1] ?? '';
    expect(build, 'the build stops when VERSION is not package.json\'s, and records REVISION as the commit').to.include('"$manifest" != "$VERSION"').and.include('DROPSTREAM_COMMIT=$REVISION npm run build');
  });

  it('when the image is built on a host with no registry, then no syntax directive pulls a Dockerfile frontend', () => {
    expect(read('Dockerfile')).to.not.match(/^#\s*syntax\s*=/im);
  });

  it('when npm ci runs behind a TLS-intercepting proxy, then its CA comes as a build secret and is never stored', () => {
    const build = stages[0]?.lines ?? [];
    const install = build.find(([op, args]) => op === 'RUN' && args.includes('npm ci'))?.[1] ?? '';
    expect(install).to.include('--mount=type=secret,id=npm_ca');
    expect(install).to.include('NODE_EXTRA_CA_CERTS=/run/secrets/npm_ca');
    const stored = stages.flatMap((stage) => stage.lines).filter(([op, args]) => ['COPY', 'ADD', 'ENV', 'ARG'].includes(op) && /\b(ca|cert)/i.test(args));
    expect(stored).to.deep.equal([]);
  });

  it('when `docker stop` sends SIGTERM and SIGKILL 10 s later (its default), then the image drains for less', () => {
    expect(last('STOPSIGNAL')).to.equal('SIGTERM');
    const env = runtime.lines.filter(([op]) => op === 'ENV').map(([, args]) => args).join(' ');
    const timeout = Number(/\bSHUTDOWN_TIMEOUT=(\d+)/.exec(env)?.[1]);
    // What is left after the drain: cut uploads clean up, then the store, Redis and the database close.
    expect(10 - timeout).to.be.at.least(3);
    expect(loadConfig({ SHUTDOWN_TIMEOUT: String(timeout) }).shutdownTimeout).to.equal(timeout);
  });

  it('when an operator runs `docker exec <container> dropstream ...`, then dropstream is on PATH', () => {
    const run = runtime.lines.filter(([op]) => op === 'RUN').map(([, args]) => args).join(' ');
    expect(run).to.include('ln -s /app/bin/dropstream.js /usr/local/bin/dropstream');
  });

  it('when the build context is sent, then dependencies, build output, local data and secrets stay out', () => {
    const ignored = read('.dockerignore').split('\n').map((line) => line.trim());
    expect(ignored).to.include.members(['node_modules', 'dist', 'src/generated', 'data', '.env', '.git']);
  });
});
