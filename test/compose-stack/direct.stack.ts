// The compose stack with uploads sent straight to the store: the project's
// files plus docker-compose.direct.yml (the app signs part URLs for
// PUBLIC_URL, the proxy routes signed part PUTs to MinIO through
// caddy/s3-direct.caddy), issue 55. Runs after offload.stack.ts on the stack
// it leaves running; adding this override instead recreates the app and the
// proxy. Needs nothing from the other files: its own account and file.
import { createHash, randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { expect } from 'chai';
import { compose, required, services, stackEnv } from './stack.js';

const HEALTHY_WITHIN_S = 120;
const MiB = 1024 * 1024;
const DATA = randomBytes(12 * MiB + 5);

const url = process.env.STACK_URL ?? 'http://127.0.0.1:3000';
const work = { env: {} as Record<string, string>, key: '' };
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

const report = (line: Record<string, unknown>) => console.log(`      stack: ${JSON.stringify(line)}`);

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${url}/api/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${work.key}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

describe('compose stack with uploads sent straight to MinIO through the proxy (docker-compose.direct.yml)', function () {
  this.timeout(300_000);

  before(async () => {
    required('DOCKER_HOST');
    const files = required('COMPOSE_FILE').split(':');
    work.env = { COMPOSE_FILE: [...files, join(dirname(files[0]!), 'docker-compose.direct.yml')].join(':') };
  });

  afterEach(async function () {
    if (this.currentTest?.state !== 'failed') return;
    console.log(await compose(['ps', '--all'], work.env).catch((e) => String(e)));
    console.log(await compose(['logs', '--tail', '30', '--no-color', 'app', 'proxy'], work.env).catch((e) => String(e)));
  });

  it('when the direct override is added and `up -d` runs, then every service is healthy again and the app offers direct uploads', async () => {
    const started = Date.now();
    await compose(['up', '-d', '--wait', '--wait-timeout', String(HEALTHY_WITHIN_S)], work.env);
    const seconds = (Date.now() - started) / 1000;
    const running = (await services()).filter((s) => s.Service !== 'minio-init');
    expect(running.filter((s) => s.Health !== 'healthy').map((s) => s.Name), 'services not healthy').to.deep.equal([]);
    work.key = JSON.parse(await compose(['exec', '-T', 'app', 'dropstream', 'accounts', 'create', '--plan', 'pro'], work.env)).api_key;
    expect((await api('GET', '/uploads/direct')).status).to.equal(200);
    report({ direct_up_healthy_s: Number(seconds.toFixed(1)) });
  });

  it('when a file goes up in parts to the URLs the app signed, then they reach MinIO through the proxy on the app\'s origin, and the file has the exact bytes', async () => {
    expect(work.key, 'an account from the first test').to.not.equal('');
    const created = await api('POST', '/uploads/direct', { filename: 'direct.bin', size: DATA.length, part_size: 5 * MiB });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const urls = created.body.part_urls as { part_number: number; size: number; url: string }[];
    expect(urls.every((u) => u.url.startsWith(`${url}/${stackEnv().S3_BUCKET}/`)), urls[0]?.url).to.equal(true);
    // A body of another length than signed: the store refuses it (its answer, through the proxy).
    const longer = await fetch(urls[0]!.url, { method: 'PUT', body: DATA.subarray(0, 5 * MiB + 1) });
    await longer.arrayBuffer();
    expect([longer.status, longer.headers.has('x-amz-request-id')]).to.deep.equal([403, true]);
    const started = Date.now();
    const parts = [];
    for (const u of urls) {
      const res = await fetch(u.url, { method: 'PUT', body: DATA.subarray((u.part_number - 1) * 5 * MiB, (u.part_number - 1) * 5 * MiB + u.size) });
      await res.arrayBuffer();
      expect(res.status, `part ${u.part_number}`).to.equal(200);
      parts.push({ part_number: u.part_number, etag: res.headers.get('etag') ?? '' });
    }
    const seconds = (Date.now() - started) / 1000;
    const done = await api('POST', `/uploads/direct/${created.body.upload_id}/complete`, { parts });
    expect(done.status, JSON.stringify(done.body)).to.equal(201);
    const download = await fetch(done.body.public_link);
    expect(sha(Buffer.from(await download.arrayBuffer()))).to.equal(sha(DATA));
    report({ direct_parts_mib_s: Number((DATA.length / MiB / seconds).toFixed(1)) });
  });

  it('when a request under the bucket\'s path is not a signed part PUT, then the app answers it (404), never MinIO', async () => {
    const created = await api('POST', '/uploads/direct', { filename: 'probe.bin', size: 10 });
    const signed = new URL(created.body.part_urls[0].url);
    const unsigned = new URL(signed);
    unsigned.searchParams.delete('X-Amz-Signature');
    const whole = new URL(signed);
    whole.search = `X-Amz-Signature=${signed.searchParams.get('X-Amz-Signature')}`;
    const asked = [
      ['PUT without a signature', await fetch(unsigned, { method: 'PUT', body: 'x'.repeat(10) })],
      ['PUT of a whole object', await fetch(whole, { method: 'PUT', body: 'x'.repeat(10) })],
      ['GET of the part URL', await fetch(signed)],
    ] as const;
    const answers = asked.map(([what, res]) => [what, res.status, res.headers.has('x-amz-request-id') ? 'store' : 'app']);
    expect(answers).to.deep.equal(asked.map(([what]) => [what, 404, 'app']));
    expect((await api('DELETE', `/uploads/direct/${created.body.upload_id}`)).status).to.equal(200);
  });
});
