// A client that reads a download a little now and then (DOWNLOAD_MIN_RATE):
// without a cut it holds the store's stream and, on a link with
// max_downloads, the share of the link's byte budget reserved for it, so
// every other client gets 410 for as long as it trickles. Once cut, what
// never left the server goes back to the budget (what did leave stays
// charged, as for any download cut short). IDLE_TIMEOUT does
// not catch it: the connection is never silent. The trickling client here
// reads one chunk every half second (at most 128 KiB/s) from a raw socket.
import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { call, upload } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { trickle } from '../helpers/trickle.js';

const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const SIZE = 32 * 1024 * 1024;

for (const backend of backends) {
  describe(`downloads read too slowly (${backend})`, function () {
    this.timeout(60_000);
    let t: TestServer;
    let key: string;

    before(async () => {
      t = await startTestServer(backend, { DOWNLOAD_MIN_RATE: String(512 * 1024), DOWNLOAD_RATE_WINDOW: '2' });
      ({ apiKey: key } = await t.account());
    });
    after(() => t?.close());

    it('when a client trickles a max_downloads 1 download, then it is cut within the window once the buffers are full, and the link serves again', async () => {
      const content = randomBytes(SIZE);
      const res = await upload(t.server.url, key, [
        { name: 'max_downloads', content: '1' },
        { name: 'file', filename: 'big.bin', content },
      ]);
      expect(res.status).to.equal(201);
      const link = t.url((res.body as { public_link: string }).public_link);
      const firstKiB = () => fetch(link, { headers: { Range: 'bytes=0-1023' } });

      const slow = trickle(link, 500);
      await slow.started;
      // While it holds the budget (the whole file's bytes, reserved for it), nobody else gets a byte.
      const during = await firstKiB();
      expect(during.status, 'during the trickle').to.equal(410);
      const ended = await slow.endedWithin(30_000);
      slow.close();
      expect(ended, 'the server reset the trickling connection').to.not.equal(undefined);
      expect(ended!.afterMs).to.be.below(20_000);
      expect(ended!.bytes).to.be.below(SIZE);

      // What never left the server went back to the budget (as the cut connection closed).
      let after = await firstKiB();
      for (const until = Date.now() + 2000; after.status === 410 && Date.now() < until; ) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        after = await firstKiB();
      }
      expect(after.status, 'after the cut').to.equal(206);
      expect(sha(Buffer.from(await after.arrayBuffer()))).to.equal(sha(content.subarray(0, 1024)));
    });
  });
}
