// S3 downloads through the pooled reads (issue 54, src/storage/pooled-read.ts),
// as a client sees them: a revoke still reaches a download in flight, and a
// limited link is still charged what its client took, exactly one whole
// download counted.
import { createHash, randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { expect } from 'chai';
import { call, upload } from '../helpers/client.js';
import { eventually, sleep } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { trickle, type Trickle } from '../helpers/trickle.js';

const MiB = 1024 * 1024;
const SIZE = 8 * MiB;
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/** GETs `url` on a raw socket and stops reading after its first 64 KiB. */
function readFirst64KiB(url: string): Promise<{ socket: Socket; bytes: number }> {
  const { hostname, port, pathname } = new URL(url);
  const socket = connect(Number(port), hostname);
  socket.on('error', () => {});
  socket.write(`GET ${pathname} HTTP/1.1\r\nHost: ${hostname}:${port}\r\n\r\n`);
  return new Promise((resolve) => {
    let bytes = 0;
    socket.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes < 64 * 1024) return;
      socket.pause();
      socket.removeAllListeners('data');
      resolve({ socket, bytes });
    });
  });
}

describe('S3 downloads read into reused buffers, through the service', function () {
  this.timeout(60_000);
  let s3: TestS3;
  let t: TestServer;
  let key: string;
  const downloads: Trickle[] = [];

  before(async () => {
    s3 = await startTestS3();
    t = await startTestServer('pglite', { ...s3.env(s3.bucket('pooled-http')), S3_PART_SIZE: String(5 * MiB) });
    key = (await t.account()).apiKey;
  });
  afterEach(() => downloads.splice(0).forEach((d) => d.close()));
  after(async () => {
    await t?.close();
    await s3?.close();
  });

  it('when a link is revoked while a slow client downloads through it, then the download ends within 1.5 s, long before its last byte', async () => {
    const res = await upload(t.server.url, key, [{ name: 'file', filename: 'big.bin', content: randomBytes(SIZE) }]);
    expect(res.status).to.equal(201);
    const download = trickle(t.url(res.body.public_link as string), 50);
    downloads.push(download);
    await download.started;
    const links = (await call(t.url(`/api/v1/files/${res.body.file_id}/links`), { key })).body.links;
    const revoked = Date.now();
    expect((await call(t.url(`/api/v1/files/${res.body.file_id}/links/${links[0].link_id}`), { method: 'DELETE', key })).status).to.equal(200);
    const ended = await download.endedWithin(1500);
    expect(ended, 'the download still runs').to.not.equal(undefined);
    expect(ended!.at - revoked).to.be.below(1500);
    expect(ended!.bytes).to.be.below(SIZE / 2);
  });

  it('when a client takes 64 KiB of a max_downloads 1 file and leaves, then it is charged about what it took, the next download gets every byte, and the one after is refused', async () => {
    const content = randomBytes(SIZE);
    const res = await upload(t.server.url, key, [
      { name: 'max_downloads', content: '1' },
      { name: 'file', filename: 'limited.bin', content },
    ]);
    expect(res.status).to.equal(201);
    const url = t.url(res.body.public_link as string);
    const charged = async () => Number((await t.server.db.prisma.link.findFirstOrThrow({ where: { fileId: res.body.file_id } })).bytesServed);
    const { socket, bytes } = await readFirst64KiB(url);
    // The client's behaviour, not a poll (as in download-charge.test.ts): it
    // idles a moment while the server fills the kernel's buffers, then leaves.
    await sleep(500);
    socket.destroy();
    const charge = await eventually(charged, (b) => b < SIZE);
    expect(charge).to.be.at.least(bytes);
    expect(charge).to.be.below(2 * MiB);
    const full = await fetch(url);
    expect(full.status).to.equal(200);
    expect(sha(Buffer.from(await full.arrayBuffer()))).to.equal(sha(content));
    expect((await fetch(url)).status).to.equal(410);
    const info = await call(t.url(`/api/v1/files/${res.body.file_id}`), { key });
    expect(info.body.file.download_count).to.equal(1);
  });
});
