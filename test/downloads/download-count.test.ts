// download_count under clients that close the connection the moment they
// have the last byte (curl does), alone, one after another and all at once,
// on both stores and both databases. A download cut mid-way never counts.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { call, uploadFile } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { captureLog, type CapturedLog } from '../helpers/log-capture.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const run = promisify(execFile);
const MiB = 1024 * 1024;
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

interface Fetched {
  status: number;
  body: Buffer;
}

/**
 * GET over a raw connection that is destroyed once `cutAfter` body bytes
 * have arrived: a client that gives up mid-way.
 */
function fetchAndCut(url: string, cutAfter: number): Promise<Fetched> {
  const { hostname, port, pathname } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let bodyStart = -1;
    let received = 0;
    socket.on('connect', () => socket.write(`GET ${pathname} HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`));
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      received += chunk.length;
      if (bodyStart < 0) bodyStart = Buffer.concat(chunks).indexOf('\r\n\r\n') + 4 || -1;
      if (bodyStart > 0 && received - bodyStart >= cutAfter) {
        socket.destroy();
        const all = Buffer.concat(chunks);
        resolve({ status: Number(all.subarray(9, 12).toString()), body: all.subarray(bodyStart) });
      }
    });
    socket.on('error', reject);
  });
}

/**
 * curl, in its own process, saving the body to `out`: it closes the
 * connection as soon as it has the last byte and exits, which is what made
 * complete downloads go uncounted.
 */
async function curlDownload(url: string, out: string): Promise<Buffer> {
  await run('curl', ['-sS', '--fail', '-o', out, url]);
  return readFile(out);
}

for (const backend of backends) {
  for (const storeKind of ['local', 's3'] as const) {
    describe(`download counts (${storeKind} store, ${backend})`, () => {
      let s3: TestS3 | undefined;
      let t: TestServer;
      let log: CapturedLog;
      let key: string;
      const content = randomBytes(6 * MiB);
      let file: { file_id: number; public_link: string };
      let dir: string;

      before(async () => {
        dir = await mkdtemp(join(tmpdir(), 'dropstream-curl-'));
        log = captureLog('info');
        s3 = storeKind === 's3' ? await startTestS3() : undefined;
        t = await startTestServer(backend, s3 ? s3.env(s3.bucket(`counts-${backend}`)) : {}, log.logger);
        ({ apiKey: key } = await t.account());
        file = (await uploadFile(t.server.url, key, 'counted.bin', content)).body;
      });
      after(async () => {
        await t.close();
        await s3?.close();
        await rm(dir, { recursive: true, force: true });
      });

      const countOf = async (fileId: number) =>
        (await call(t.url(`/api/v1/files/${fileId}`), { key })).body.file.download_count as number;
      const downloadLines = () => log.requests().filter((l) => l.route === '/download/:token');

      it('when curl downloads the whole file 20 times one after another (closing at the last byte), then the count is exactly 20 and each is logged 200', async () => {
        const logged = downloadLines().length;
        for (let i = 0; i < 20; i++) {
          expect(sha(await curlDownload(t.url(file.public_link), join(dir, 'out.bin')))).to.equal(sha(content));
        }
        expect(await eventually(() => countOf(file.file_id), (n) => n === 20)).to.equal(20);
        const lines = await eventually(async () => downloadLines().slice(logged), (l) => l.length === 20);
        expect(lines.map((l) => l.status)).to.deep.equal(Array(20).fill(200));
      });

      it('when 20 curl processes download it at once, then all 20 count (40 in all)', async () => {
        const got = await Promise.all(Array.from({ length: 20 }, (_, i) => curlDownload(t.url(file.public_link), join(dir, `out-${i}.bin`))));
        for (const body of got) expect(sha(body)).to.equal(sha(content));
        expect(await eventually(() => countOf(file.file_id), (n) => n === 40)).to.equal(40);
      });

      it('when a download is cut mid-way, then it is not counted and is logged 499 (a whole download after it counts 1)', async () => {
        const up = (await uploadFile(t.server.url, key, 'cut.bin', content)).body;
        const logged = downloadLines().length;
        const got = await fetchAndCut(t.url(up.public_link), MiB);
        expect(got.status).to.equal(200);
        expect(got.body.length).to.be.below(content.length);
        const lines = await eventually(async () => downloadLines().slice(logged), (l) => l.length === 1);
        expect(lines.map((l) => l.status)).to.deep.equal([499]);
        // A whole download after it is the barrier: its count is settled after
        // the cut's would have been, so once it shows, a counted cut shows too.
        expect(sha(await curlDownload(t.url(up.public_link), join(dir, 'after-cut.bin')))).to.equal(sha(content));
        expect(await eventually(() => countOf(up.file_id), (n) => n >= 1)).to.equal(1);
      });

      // The report: 10 back-to-back curl downloads of 64 MiB counted 7 (local
      // store). Once: the database plays no part in the race. On PGlite,
      // which every run has (backends[0] is PostgreSQL in CI's services
      // stage, which ran it a second time there, about 22 s).
      if (storeKind === 'local' && backend === 'pglite') {
        it('when curl uploads a 64 MiB file and downloads it 10 times back to back, then the count is exactly 10', async function () {
          // 640 MiB through curl: about 10 s alone, over 30 s on a loaded machine.
          this.timeout(120_000);
          const big = randomBytes(64 * MiB);
          await writeFile(join(dir, 'big.bin'), big);
          const { stdout } = await run('curl', ['-sS', '--fail', '-H', `Authorization: Bearer ${key}`, '-F', `file=@${join(dir, 'big.bin')}`, `${t.server.url}/api/v1/files/upload`]);
          const up = JSON.parse(stdout);
          for (let i = 0; i < 10; i++) expect(sha(await curlDownload(t.url(up.public_link), join(dir, 'out.bin')))).to.equal(sha(big));
          expect(await eventually(() => countOf(up.file_id), (n) => n === 10)).to.equal(10);
        });
      }
    });
  }
}
