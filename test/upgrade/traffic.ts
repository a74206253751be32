// What the upgrade test sends, and the facts it expects from it: every file
// it uploaded (plain, tus, through a file request), with its SHA-256, how
// often it was downloaded whole, whether it was deleted. Background workers
// upload, download and delete through the fleet's rotation while instances
// come and go; any answer other than the one expected is kept for the test
// to show.
import { randomBytes, createHash } from 'node:crypto';
import { request } from 'node:http';
import { BOUNDARY, multipartBody, multipartType } from '../helpers/multipart.js';
import { sha256, type Answer, type Fleet, type Instance } from './fleet.js';

const MiB = 1024 * 1024;
/** Files the workers upload at most (each is downloaded at the end); then they download and delete. */
const MAX_FILES = 80;

export interface FileFact {
  name: string;
  kind: 'plain' | 'tus' | 'request';
  sha256: string;
  size: number;
  /** Unknown for a file request's upload (its receipt names none) until the list shows it. */
  id?: number;
  link?: string;
  /** Whole downloads answered 200 with the right bytes, over all its links. */
  downloads: number;
  deleted: boolean;
  /** Downloads in progress: a worker deletes only files nobody is reading. */
  busy: number;
}

export class Ledger {
  readonly files: FileFact[] = [];
  /** Answers the test did not expect (a 4xx, a wrong body), with where they came from. */
  readonly unexpected: string[] = [];
  linkExhausted = 0;

  add(fact: Omit<FileFact, 'downloads' | 'deleted' | 'busy'>): FileFact {
    const full = { ...fact, downloads: 0, deleted: false, busy: 0 };
    this.files.push(full);
    return full;
  }

  expect(what: string, answer: Answer & { instance: Instance }, status: number): boolean {
    if (answer.status === status) return true;
    this.unexpected.push(`${what} on ${answer.instance.name} (${answer.instance.version}): ${answer.status} ${answer.body.toString('utf8').slice(0, 300)}`);
    return false;
  }

  get live(): FileFact[] {
    return this.files.filter((f) => !f.deleted);
  }
}

const json = (body: unknown): { headers: Record<string, string>; body: Buffer } => ({
  headers: { 'Content-Type': 'application/json' },
  body: Buffer.from(JSON.stringify(body)),
});

export class Client {
  constructor(
    readonly fleet: Fleet,
    readonly ledger: Ledger,
    readonly key: string,
  ) {}

  private auth(headers: Record<string, string> = {}) {
    return { Authorization: `Bearer ${this.key}`, ...headers };
  }

  async api(method: string, path: string, body?: unknown, on?: Instance) {
    const payload = body === undefined ? undefined : json(body);
    return this.fleet.call(path, { method, headers: this.auth(payload?.headers), body: payload?.body }, on);
  }

  /** A plain upload (multipart); the file is in the ledger when it answered 201. */
  async upload(name: string, data: Buffer, on?: Instance): Promise<FileFact | undefined> {
    const answer = await this.fleet.call('/api/v1/files/upload', {
      method: 'POST',
      headers: this.auth({ 'Content-Type': multipartType() }),
      body: multipartBody([{ name: 'file', filename: name, content: data }]),
    }, on);
    if (!this.ledger.expect(`upload ${name}`, answer, 201)) return undefined;
    return this.ledger.add({ name, kind: 'plain', sha256: sha256(data), size: data.length, id: answer.json.file_id, link: answer.json.public_link });
  }

  /** A whole download through a public link; counted in the file's facts when the bytes are right. */
  async download(file: FileFact, link = file.link!, on?: Instance): Promise<void> {
    file.busy++;
    try {
      const answer = await this.fleet.call(link, {}, on);
      if (!this.ledger.expect(`download ${file.name}`, answer, 200)) return;
      if (sha256(answer.body) !== file.sha256) this.ledger.unexpected.push(`download ${file.name} on ${answer.instance.name}: wrong SHA-256`);
      else file.downloads++;
    } finally {
      file.busy--;
    }
  }

  async delete(file: FileFact, on?: Instance): Promise<void> {
    file.deleted = true;
    const answer = await this.api('DELETE', `/api/v1/files/${file.id}`, undefined, on);
    this.ledger.expect(`delete ${file.name}`, answer, 200);
  }

  /** Creates a tus upload of `data` on `on`; returns its path. */
  async tusCreate(name: string, length: number, on: Instance): Promise<string> {
    const answer = await this.fleet.call('/api/v1/uploads', {
      method: 'POST',
      headers: this.auth({ 'Tus-Resumable': '1.0.0', 'Upload-Length': String(length), 'Upload-Metadata': `filename ${Buffer.from(name).toString('base64')}` }),
    }, on);
    if (!this.ledger.expect(`tus create ${name}`, answer, 201)) throw new Error(this.ledger.unexpected.at(-1));
    return String(answer.headers.location);
  }

  /** PATCHes `data.subarray(from, to)` at `from` on `on`; the answer. */
  async tusPatch(path: string, data: Buffer, from: number, to: number, on: Instance) {
    return this.fleet.call(path, {
      method: 'PATCH',
      headers: this.auth({ 'Tus-Resumable': '1.0.0', 'Upload-Offset': String(from), 'Content-Type': 'application/offset+octet-stream' }),
      body: data.subarray(from, to),
    }, on);
  }

  /**
   * A tus upload in two PATCHes: created and half sent on `first`, finished
   * on `second` (another version's instance: the upload crosses the upgrade).
   */
  async tusAcross(name: string, data: Buffer, first: Instance, second: Instance): Promise<FileFact | undefined> {
    const path = await this.tusCreate(name, data.length, first);
    const half = Math.floor(data.length / 2);
    const head = await this.tusPatch(path, data, 0, half, first);
    if (!this.ledger.expect(`tus PATCH 1 of ${name}`, head, 204)) return undefined;
    return this.tusFinish(name, path, data, half, second);
  }

  async tusFinish(name: string, path: string, data: Buffer, from: number, on: Instance): Promise<FileFact | undefined> {
    const tail = await this.tusPatch(path, data, from, data.length, on);
    if (!this.ledger.expect(`tus last PATCH of ${name}`, tail, 204)) return undefined;
    return this.ledger.add({
      name,
      kind: 'tus',
      sha256: sha256(data),
      size: data.length,
      id: Number(tail.headers['dropstream-file-id']),
      link: String(tail.headers['dropstream-public-link']),
    });
  }

  /** An outsider's upload through a file request's link (`/r/{token}`); its file is found by name at the end. */
  async requestUpload(uploadLink: string, name: string, data: Buffer, on?: Instance): Promise<void> {
    const path = `${new URL(uploadLink).pathname}/files`;
    const answer = await this.fleet.call(path, { method: 'POST', headers: { 'Content-Type': multipartType() }, body: multipartBody([{ name: 'file', filename: name, content: data }]) }, on);
    if (this.ledger.expect(`request upload ${name}`, answer, 201)) this.ledger.add({ name, kind: 'request', sha256: sha256(data), size: data.length });
  }
}

/** Workers that upload, download and delete through the rotation until stopped. */
export class Traffic {
  private stopping = false;
  private running: Promise<void>[] = [];
  iterations = 0;
  /** Uploads of several parts so far. */
  private large = 0;

  constructor(private readonly client: Client) {}

  start(workers = 3): void {
    for (let w = 0; w < workers; w++) this.running.push(this.work(w));
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.running);
  }

  private async work(worker: number): Promise<void> {
    const { client, ledger } = { client: this.client, ledger: this.client.ledger };
    while (!this.stopping) {
      const n = this.iterations++;
      try {
        if (n % 10 === 9) {
          const idle = ledger.live.filter((f) => f.kind === 'plain' && f.busy === 0 && f.id !== undefined);
          if (idle.length > 1) await client.delete(idle[n % idle.length]!);
        } else if ((n % 3 === 0 && ledger.files.length < MAX_FILES) || ledger.live.length < 3) {
          // Small files, and a few that span three 5 MiB parts (every file is downloaded at the end).
          const size = n % 5 === 0 && this.large++ < 4 ? 11 * MiB + (n % 1000) : (n * 7919) % (512 * 1024);
          await client.upload(`plain-${worker}-${n}.bin`, randomBytes(size));
        } else {
          // Small files only: the bytes of the big ones are checked at the end.
          const linked = ledger.live.filter((f) => f.link && f.size <= MiB);
          if (linked.length) await client.download(linked[n % linked.length]!);
        }
      } catch (err) {
        ledger.unexpected.push(`worker ${worker}, step ${n}: ${(err as Error).message}`);
      }
    }
  }
}

/**
 * A download read at about `rate` bytes a second, which stops reading after
 * `holdAt` bytes until release(): the test decides when it is in flight.
 * Resolves with its status, size and SHA-256.
 */
export function slowDownload(url: string, rate: number, holdAt: number) {
  const state = { received: 0 };
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const done = new Promise<{ status: number; size: number; sha256: string }>((resolve, reject) => {
    const req = request(url, { agent: false, headers: { Connection: 'close' } });
    req.on('error', reject);
    req.on('response', (res) => {
      const hash = createHash('sha256');
      res.on('data', (chunk: Buffer) => {
        const before = state.received;
        state.received += chunk.length;
        hash.update(chunk);
        res.pause();
        const pace = new Promise((r) => setTimeout(r, (chunk.length / rate) * 1000));
        void (before < holdAt && state.received >= holdAt ? Promise.all([pace, released]) : pace).then(() => res.resume());
      });
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode!, size: state.received, sha256: hash.digest('hex') }));
    });
    req.end();
  });
  return { state, done, release: () => release() };
}

/** A plain upload that has sent its headers and the first part of `data`, and sends the rest on finish(). */
export function openUpload(url: string, key: string, name: string, data: Buffer, sentFirst: number) {
  const head = Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
  const req = request(`${url}/api/v1/files/upload`, {
    method: 'POST',
    agent: false,
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': multipartType(), 'Content-Length': String(head.length + data.length + tail.length), Connection: 'close' },
  });
  const answer = new Promise<{ status: number; json: any }>((resolve, reject) => {
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {}
        resolve({ status: res.statusCode!, json: parsed ?? text });
      });
    });
  });
  req.write(head);
  req.write(data.subarray(0, sentFirst));
  return {
    answer,
    finish(): typeof answer {
      req.end(Buffer.concat([data.subarray(sentFirst), tail]));
      return answer;
    },
  };
}
