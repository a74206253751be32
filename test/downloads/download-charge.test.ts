// A limited link is charged what its client acknowledged (issue 38, 6): a
// client that stops after 64 KiB of a 20 MiB file on max_downloads=1 was
// charged 4.19 MB, everything handed to the kernel, and the real recipient
// then got 410. Now what was still in the response's and the kernel's send
// buffers when it ended goes back, and a whole download may pass the budget
// by an eighth of the file (links.ts: slackOf), so the next full download
// succeeds. The client reads from a raw socket and stops after 64 KiB.
import { createHash, randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { expect } from 'chai';
import { upload } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { eventually, sleep } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const SIZE = 20 * 1024 * 1024;
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/** GETs `url` on a raw socket and stops reading once 64 KiB arrived; resolves with the socket and the bytes read. */
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

for (const backend of backends) {
  describe(`a limited link's charge for a download that stops early (${backend})`, function () {
    this.timeout(60_000);
    let t: TestServer;
    let key: string;
    before(async () => {
      // A stalled client is cut after 2 s below 512 KiB/s.
      t = await startTestServer(backend, { DOWNLOAD_MIN_RATE: String(512 * 1024), DOWNLOAD_RATE_WINDOW: '2' });
      key = (await t.account()).apiKey;
    });
    after(() => t?.close());

    async function limitedFile() {
      const content = randomBytes(SIZE);
      const res = await upload(t.server.url, key, [
        { name: 'max_downloads', content: '1' },
        { name: 'file', filename: 'big.bin', content },
      ]);
      expect(res.status).to.equal(201);
      const charged = async () => Number((await t.server.db.prisma.link.findFirstOrThrow({ where: { fileId: res.body.file_id } })).bytesServed);
      return { content, url: t.url(res.body.public_link as string), charged };
    }

    /** After the early stop settled: its charge is far below what was handed to the kernel, and a full download still succeeds. */
    async function recipientStillGetsIt(file: Awaited<ReturnType<typeof limitedFile>>, read: number) {
      // While the stopped download runs, its whole reservation is held; it settles once it ended.
      const charged = await eventually(file.charged, (bytes) => bytes < SIZE);
      expect(charged, 'charged at least what the client read').to.be.at.least(read);
      expect(charged, 'charged far less than the 4 MB handed to the kernel').to.be.below(2 * 1024 * 1024);
      const full = await fetch(file.url);
      expect(full.status).to.equal(200);
      expect(sha(Buffer.from(await full.arrayBuffer()))).to.equal(sha(file.content));
      // And that used the link up.
      expect((await fetch(file.url)).status).to.equal(410);
    }

    it('when a client reads 64 KiB of a max_downloads 1 file, idles and closes, then it is charged about what it took, and the next full download succeeds', async () => {
      const file = await limitedFile();
      const { socket, bytes } = await readFirst64KiB(file.url);
      // The client's behaviour, not a poll: it idles a moment (the server fills the buffers meanwhile), then leaves.
      await sleep(500);
      socket.destroy();
      await recipientStillGetsIt(file, bytes);
    });

    it('when a client reads 64 KiB of a max_downloads 1 file and stalls until it is cut, then it is charged about what it took, and the next full download succeeds', async () => {
      const file = await limitedFile();
      const { socket, bytes } = await readFirst64KiB(file.url);
      // The server cuts it (DOWNLOAD_MIN_RATE) and settles; the paused client
      // reads nothing, so it would not notice the reset itself.
      expect(await eventually(file.charged, (charged) => charged < SIZE, 20_000), 'settled after the cut').to.be.below(SIZE);
      socket.destroy();
      await recipientStillGetsIt(file, bytes);
    });
  });
}
