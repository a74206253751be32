// Instances of two versions against one PostgreSQL, Redis and bucket, and a
// client that spreads requests over the live ones as the compose stack's
// proxy does (round-robin; a refused connection is tried on the next one,
// as Caddy's lb_try_duration does). Every answer is recorded, so the test can
// say afterwards that none was a 5xx. Each request opens a connection of its
// own: a retired instance then never sees a request sent after it left the
// rotation (no keep-alive connection races its drain).
//
// Retiring an instance takes it out of the rotation and waits for the
// rotation's requests already sent to it to be answered before SIGTERM, as a
// proxy that deregisters an upstream first does: a connection still in the
// listener's backlog when the drain closes the listener is reset by the
// kernel (seen here as "socket hang up" on an upload; behind Caddy, a 502).
// Requests sent to an instance on purpose (`on`) are not waited for: they
// are what the drain must carry.
import { createHash } from 'node:crypto';
import { request, type IncomingHttpHeaders } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The body parsed as JSON, when it is JSON. */
  json: any;
}

export interface SendInit {
  method?: string;
  headers?: Record<string, string>;
  body?: Buffer;
}

/** One request on a connection of its own; rejects with the socket's error (code ECONNREFUSED: nothing was sent). */
export function send(url: string, { method = 'GET', headers = {}, body }: SendInit = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method,
      agent: false,
      headers: { Connection: 'close', ...(body ? { 'Content-Length': String(body.length) } : {}), ...headers },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const buffer = Buffer.concat(chunks);
        let json: unknown;
        try {
          json = JSON.parse(buffer.toString('utf8'));
        } catch {}
        resolve({ status: res.statusCode!, headers: res.headers, body: buffer, json });
      });
    });
    req.end(body);
  });
}

export const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

export interface Instance {
  name: string;
  /** 'old': the previous release's build; 'new': this checkout. */
  version: 'old' | 'new';
  url: string;
  adminUrl: string;
  process: ServerProcess;
  dataDir: string;
}

export interface Recorded {
  instance: string;
  method: string;
  path: string;
  status: number;
}

export class Fleet {
  readonly answers: Recorded[] = [];
  /** Requests that got no answer at all (other than a refused connection, which moves on). */
  readonly failures: string[] = [];
  readonly all: Instance[] = [];
  live: Instance[] = [];
  private turn = 0;
  /** Rotation requests not yet answered, per instance. */
  private readonly inFlight = new Map<Instance, number>();

  constructor(
    /** Settings every instance shares (database, Redis, store, admin token, PUBLIC_URL, ...). */
    private readonly env: Record<string, string>,
    /** The old release's build; the new version is this checkout. */
    private readonly oldRoot: string,
  ) {}

  /** Starts an instance and puts it in the rotation once it listens. */
  async start(name: string, version: 'old' | 'new'): Promise<Instance> {
    const dataDir = await mkdtemp(join(process.env.TEST_DATA_ROOT || tmpdir(), `dropstream-upgrade-${name}-`));
    const child = await startServerProcess({ ...this.env, DATA_DIR: dataDir }, { root: version === 'old' ? this.oldRoot : undefined });
    const instance: Instance = { name, version, url: child.url, adminUrl: child.adminUrl, process: child, dataDir };
    this.all.push(instance);
    this.live.push(instance);
    return instance;
  }

  /** The next live instance, round-robin; of one version when asked. */
  pick(version?: 'old' | 'new'): Instance {
    const choices = this.live.filter((i) => !version || i.version === version);
    if (!choices.length) throw new Error(`no live ${version ?? ''} instance`);
    return choices[this.turn++ % choices.length]!;
  }

  /** A request to `path` (or a public link's path) on `on`, or on the next live instance. */
  async call(path: string, init: SendInit = {}, on?: Instance): Promise<Answer & { instance: Instance }> {
    const pathOnly = path.replace(/^https?:\/\/[^/]+/, '');
    for (let tries = 0; ; tries++) {
      const instance = on ?? this.pick();
      if (!on) this.inFlight.set(instance, (this.inFlight.get(instance) ?? 0) + 1);
      try {
        const answer = await send(instance.url + pathOnly, init).finally(() => {
          if (!on) this.inFlight.set(instance, this.inFlight.get(instance)! - 1);
        });
        this.answers.push({ instance: instance.name, method: init.method ?? 'GET', path: pathOnly.replace(/\/(download|r|uploads)\/[^/?]+/, '/$1/:id'), status: answer.status });
        return { ...answer, instance };
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ECONNREFUSED' && !on && tries < 5) continue;
        this.failures.push(`${init.method ?? 'GET'} ${pathOnly} on ${instance.name}: ${code ?? (err as Error).message}`);
        throw err;
      }
    }
  }

  /**
   * Takes an instance out of the rotation, waits for the rotation's requests
   * to it to be answered, then sends it SIGTERM (as `docker stop` and compose
   * do); resolves with its exit code once it has drained and exited.
   */
  async retire(instance: Instance): Promise<number | null> {
    this.live = this.live.filter((i) => i !== instance);
    for (const deadline = Date.now() + 120_000; (this.inFlight.get(instance) ?? 0) > 0; ) {
      if (Date.now() > deadline) throw new Error(`${instance.name}: rotation requests still unanswered after 120 s`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const exited = new Promise<number | null>((resolve) => {
      if (instance.process.child.exitCode !== null) resolve(instance.process.child.exitCode);
      else instance.process.child.once('exit', (code) => resolve(code));
    });
    instance.process.child.kill('SIGTERM');
    return exited;
  }

  /** Log lines of every instance at level error or worse, and request lines with a 5xx status. */
  serverErrors(): string[] {
    return this.all.flatMap((instance) =>
      instance.process.stdoutLines
        .filter((line) => {
          try {
            const entry = JSON.parse(line) as { level?: number; status?: number; msg?: string };
            return (entry.level ?? 0) >= 50 || (entry.msg === 'request' && (entry.status ?? 0) >= 500);
          } catch {
            return false;
          }
        })
        .map((line) => `${instance.name}: ${line}`),
    );
  }

  async close(): Promise<void> {
    await Promise.all(this.all.map((i) => i.process.kill('SIGKILL')));
    await Promise.all(this.all.map((i) => rm(i.dataDir, { recursive: true, force: true })));
  }
}
