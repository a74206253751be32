// SQL statements per download (issue 23: "a download resolve should stay one
// SQL statement where it was one"). Counted at the pg driver the PostgreSQL
// adapter sends them through, in this process: a plain link resolves in one
// statement and counts a complete download in one; a limited link adds one
// reservation; a range of a plain link costs the resolve alone.
import { expect } from 'chai';
import pg from 'pg';
import { upload } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

if (backends.includes('postgresql')) {
  describe('SQL statements per download (postgresql)', function () {
    this.timeout(60_000);
    let t: TestServer;
    let key: string;
    const seen: string[] = [];
    let counting = false;
    const query = pg.Client.prototype.query;

    before(async () => {
      // This server's webhook relay looks for due messages once a second: put off, so only the download's statements count.
      t = await startTestServer('postgresql', {}, undefined, { webhooks: { pollMs: 3_600_000 } });
      ({ apiKey: key } = await t.account());
      // Only this server's statements (its database is its own): other servers of the process (a suite's shared server, run in the same process) relay in the background.
      const name = (await t.server.db.prisma.$queryRaw<{ name: string }[]>`SELECT current_database() AS name`)[0]!.name;
      pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
        const first = args[0] as string | { text?: string };
        if (counting && this.database === name) seen.push((typeof first === 'string' ? first : (first?.text ?? '')).trim().split(/\s+/).slice(0, 3).join(' '));
        return (query as (...a: unknown[]) => unknown).apply(this, args);
      } as typeof query;
    });
    after(async () => {
      pg.Client.prototype.query = query;
      await t?.close();
    });

    /** Every statement sent so far, once one matching `last` is among them. */
    async function seenThrough(last: RegExp): Promise<string[]> {
      const statements = await eventually(async () => [...seen], (sent) => sent.some((s) => last.test(s)));
      expect(statements.some((s) => last.test(s)), `no ${last} among ${statements.join(', ')}`).to.equal(true);
      return statements;
    }

    /**
     * The statements one GET of `link` sends, once its count (a WITH,
     * written after the last byte) is in. A range is not counted: a whole
     * download of the link after it is, and what comes before that one's
     * two statements is the range's.
     */
    async function statementsOf(link: string, headers: Record<string, string> = {}): Promise<string[]> {
      seen.length = 0;
      counting = true;
      try {
        const res = await fetch(t.url(link), { headers });
        await res.arrayBuffer();
        expect(res.status).to.be.oneOf([200, 206]);
        if (!headers.Range) return await seenThrough(/^WITH/);
        await (await fetch(t.url(link))).arrayBuffer();
        const all = await seenThrough(/^WITH/);
        expect(all.slice(-2).map((s) => s.split(' ')[0])).to.deep.equal(['SELECT', 'WITH']);
        return all.slice(0, -2);
      } finally {
        counting = false;
      }
    }

    const uploadWith = async (options: Record<string, string>) =>
      (await upload(t.server.url, key, [...Object.entries(options).map(([name, content]) => ({ name, content })), { name: 'file', filename: 's.bin', content: 'x'.repeat(5000) }])).body.public_link as string;

    it('when a plain link is downloaded whole, then one statement resolves it and one counts it', async () => {
      const sent = await statementsOf(await uploadWith({}));
      expect(sent).to.have.length(2);
      expect(sent[0]).to.match(/^SELECT/);
      expect(sent[1]).to.match(/^WITH/); // the link's count and the file's, in one statement
    });

    it('when a range of a plain link is downloaded, then the resolve is the only statement', async () => {
      expect(await statementsOf(await uploadWith({}), { Range: 'bytes=0-9' })).to.have.length(1);
    });

    it('when a link with max_downloads is downloaded whole, then one more statement reserves its bytes', async () => {
      expect(await statementsOf(await uploadWith({ max_downloads: '3' }))).to.have.length(3);
    });
  });
}
