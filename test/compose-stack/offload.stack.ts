// The compose stack with downloads offloaded to the store: the project's
// files plus docker-compose.offload.yml (the app signs presigned URLs for
// PUBLIC_URL, the proxy routes them to MinIO through caddy/s3-offload.caddy),
// issue 41. Runs after stack.stack.ts (test/compose-stack/mocharc.json) on
// the stack it leaves running: adding the override recreates only the app
// and the proxy. Needs nothing from the other file: its own account and file.
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { expect } from 'chai';
import { compose, curl, required, services, sha256, stackEnv } from './stack.js';

const HEALTHY_WITHIN_S = 120;
const SIZE = 8 * 1024 * 1024 + 11;
/** With a space: the saved name shows that the store sent our quoted Content-Disposition. */
const NAME = 'offload report.bin';

const url = process.env.STACK_URL ?? 'http://127.0.0.1:3000';
const work = { dir: '', file: '', hash: '', env: {} as Record<string, string> };
const state = { key: '', link: '' };

const report = (line: Record<string, unknown>) => console.log(`      stack: ${JSON.stringify(line)}`);

/** curl's -D dump: the header blocks of every response it read, the last one's fields by lower-case name. */
function lastHeaders(dump: string): Record<string, string> {
  const blocks = dump.split(/\r?\n\r?\n/).filter((b) => b.startsWith('HTTP/'));
  const lines = (blocks.at(-1) ?? '').split(/\r?\n/).slice(1);
  return Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
}

describe('compose stack with downloads offloaded to MinIO through the proxy (docker-compose.offload.yml)', function () {
  this.timeout(300_000);

  before(async () => {
    required('DOCKER_HOST');
    const files = required('COMPOSE_FILE').split(':');
    // The override sits beside the project's docker-compose.yml (the first file).
    work.env = { COMPOSE_FILE: [...files, join(dirname(files[0]!), 'docker-compose.offload.yml')].join(':') };
    work.dir = await mkdtemp(join(tmpdir(), 'dropstream-offload-'));
    work.file = join(work.dir, 'source.bin');
    await writeFile(work.file, randomBytes(SIZE));
    work.hash = await sha256(work.file);
  });

  afterEach(async function () {
    if (this.currentTest?.state !== 'failed') return;
    console.log(await compose(['ps', '--all'], work.env).catch((e) => String(e)));
    console.log(await compose(['logs', '--tail', '30', '--no-color', 'app', 'proxy'], work.env).catch((e) => String(e)));
  });

  after(async () => {
    if (work.dir) await rm(work.dir, { recursive: true, force: true });
  });

  it('when the offload override is added and `up -d` runs, then every service is healthy again and a file uploads through the proxy', async () => {
    const started = Date.now();
    await compose(['up', '-d', '--wait', '--wait-timeout', String(HEALTHY_WITHIN_S)], work.env);
    const seconds = (Date.now() - started) / 1000;
    const running = (await services()).filter((s) => s.Service !== 'minio-init');
    expect(running.filter((s) => s.Health !== 'healthy').map((s) => s.Name), 'services not healthy').to.deep.equal([]);
    const account = JSON.parse(await compose(['exec', '-T', 'app', 'dropstream', 'accounts', 'create', '--plan', 'pro'], work.env));
    state.key = account.api_key;
    const { code, out, err } = await curl(['--fail-with-body', '-H', `Authorization: Bearer ${state.key}`, '-F', `file=@${work.file};filename=${NAME}`, `${url}/api/v1/files/upload`]);
    expect(code, `upload: ${err} ${out}`).to.equal(0);
    const body = JSON.parse(out);
    expect(body.size).to.equal(SIZE);
    state.link = body.public_link;
    report({ offload_up_healthy_s: Number(seconds.toFixed(1)) });
  });

  it('when a download link is fetched through the proxy, then a 302 points through the proxy to MinIO, and `curl -L` saves the exact bytes under the uploaded name', async () => {
    expect(state.link, 'a link from the first test').to.not.equal('');
    const res = await fetch(state.link, { redirect: 'manual' });
    await res.arrayBuffer();
    expect(res.status, 'offloaded: a redirect, not the bytes').to.equal(302);
    expect(res.headers.get('cache-control')).to.equal('no-store');
    const location = res.headers.get('location') ?? '';
    // The proxy's own address and the bucket's path: what caddy/s3-offload.caddy sends to MinIO.
    expect(location.startsWith(`${url}/${stackEnv().S3_BUCKET}/`), location).to.equal(true);
    expect(new URL(location).searchParams.get('X-Amz-Signature')).to.match(/^[0-9a-f]{64}$/);

    const dir = await mkdtemp(join(work.dir, 'saved-'));
    const dump = join(work.dir, 'headers.txt');
    const started = Date.now();
    const got = await curl(['--fail', '-L', '-O', '-J', '--output-dir', dir, '-D', dump, '-w', '%{num_redirects} %{http_code} %{url_effective}', state.link]);
    const seconds = (Date.now() - started) / 1000;
    expect(got.code, `curl -L: ${got.err}`).to.equal(0);
    const [redirects, status, effective] = got.out.split(' ');
    expect([redirects, status], 'one redirect, then 200').to.deep.equal(['1', '200']);
    expect(effective?.startsWith(`${url}/`), `followed ${effective}`).to.equal(true);
    const headers = lastHeaders(await readFile(dump, 'utf8'));
    // Answered by the store (S3's request id), with the name and type the app asked for in the URL.
    expect(headers, 'an S3 answer').to.have.property('x-amz-request-id');
    expect(headers['content-type']).to.equal('application/octet-stream');
    // Exactly what the app itself sends (its HEAD) for this name.
    const own = (await fetch(state.link, { method: 'HEAD' })).headers.get('content-disposition');
    expect(own).to.equal(`attachment; filename="${NAME}"; filename*=UTF-8''${encodeURIComponent(NAME)}`);
    expect(headers['content-disposition']).to.equal(own);
    expect(await readdir(dir), 'the name curl -J saved it under').to.deep.equal([NAME]);
    expect(await sha256(join(dir, NAME))).to.equal(work.hash);
    report({ offload_curl_L_mib_s: Number((SIZE / 1024 / 1024 / seconds).toFixed(1)) });
  });

  it('when the link is asked with HEAD, then the app answers it itself: 200 with the size, name and its own ETag, no redirect', async () => {
    const res = await fetch(state.link, { method: 'HEAD', redirect: 'manual' });
    expect(res.status).to.equal(200);
    expect(res.headers.get('location')).to.equal(null);
    expect(res.headers.get('content-length')).to.equal(String(SIZE));
    expect(res.headers.get('content-disposition')).to.include(`filename="${NAME}"`);
    // The app's ETag is the file's sha256 (the store's is not), and the store sends no CSP.
    expect(res.headers.get('etag')).to.equal(`"${work.hash}"`);
    expect(res.headers.get('content-security-policy')).to.equal("default-src 'none'; sandbox");
    expect(res.headers.has('x-amz-request-id')).to.equal(false);
  });

  it('when a request under the bucket\'s path is not a signed GET, then the app answers it (404), never MinIO', async () => {
    const location = (await fetch(state.link, { redirect: 'manual' })).headers.get('location') ?? '';
    expect(location, 'a presigned URL to vary').to.not.equal('');
    const unsigned = new URL(location);
    unsigned.search = '';
    const asked = [
      ['GET without a signature', await fetch(unsigned, { redirect: 'manual' })],
      ['PUT with the signature', await fetch(location, { method: 'PUT', body: 'x', redirect: 'manual' })],
      ['the bucket listing', await fetch(`${url}/${stackEnv().S3_BUCKET}/?list-type=2&X-Amz-Signature=0`, { redirect: 'manual' })],
    ] as const;
    const answers = asked.map(([what, res]) => [what, res.status, res.headers.has('x-amz-request-id') ? 'store' : 'app']);
    expect(answers).to.deep.equal(asked.map(([what]) => [what, 404, 'app']));
  });
});
