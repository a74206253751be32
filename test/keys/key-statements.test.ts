// SQL statements of keys (issue 57): last_used_at is written at most once a
// minute per key however many requests the key makes, and a request's own
// statements stay what they were (GET /api/v1/files/{id}: one). Counted at
// the pg driver the PostgreSQL adapter sends them through, as
// download-statements.test.ts does.
import { expect } from 'chai';
import pg from 'pg';
import { call, uploadFile } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { eventually } from '../helpers/raw-upload.js';
import { buildTestServer, type BuiltTestServer } from '../helpers/built-server.js';

if (backends.includes('postgresql')) {
  describe('SQL statements of API keys (postgresql)', function () {
    this.timeout(60_000);
    let t: BuiltTestServer;
    const seen: string[] = [];
    let counting = false;
    const query = pg.Client.prototype.query;

    before(async () => {
      // The webhook relay's look for due messages, put off: only the requests' statements count.
      // A key stays warm for the whole test: with the 1 s cache, a loop slowed by
      // a busy machine saw the key looked up once more (21 statements, not 20).
      t = await buildTestServer('postgresql', {}, { webhooks: { pollMs: 3_600_000 }, callerCacheMs: 600_000 });
      const name = (await t.built.db.prisma.$queryRaw<{ name: string }[]>`SELECT current_database() AS name`)[0]!.name;
      pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
        const first = args[0] as string | { text?: string };
        if (counting && this.database === name) seen.push((typeof first === 'string' ? first : (first?.text ?? '')).trim().replace(/\s+/g, ' '));
        return (query as (...a: unknown[]) => unknown).apply(this, args);
      } as typeof query;
    });
    after(async () => {
      pg.Client.prototype.query = query;
      await t?.close();
    });

    const lastUsedWrites = () => seen.filter((s) => /^UPDATE api_keys SET last_used_at/.test(s));

    it('when a key makes 100 requests, 20 at a time, then its last_used_at is written once, after the first, and the list shows it', async () => {
      const { apiKey } = await t.account();
      const id = (await uploadFile(t.baseUrl, apiKey, 'a.txt', 'a')).body.file_id as number;
      // The upload wrote it (the key's first request); the next minute's requests write nothing more.
      const before = await eventually(async () => (await call(t.url('/api/v1/keys'), { key: apiKey })).body.keys[0].last_used_at, (v) => v !== null);
      expect(before).to.be.a('string');
      seen.length = 0;
      counting = true;
      try {
        for (let round = 0; round < 5; round++) {
          const statuses = await Promise.all(Array.from({ length: 20 }, () => call(t.url(`/api/v1/files/${id}`), { key: apiKey }).then((r) => r.status)));
          expect(statuses.every((s) => s === 200)).to.equal(true);
        }
      } finally {
        counting = false;
      }
      expect(lastUsedWrites()).to.deep.equal([]);
      // A second key of the account: its first request writes its own once, whatever the load.
      const made = await call(t.url('/api/v1/keys'), { method: 'POST', key: apiKey, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'reader', scopes: ['files:read'] }) });
      const reader = made.body.key.api_key as string;
      seen.length = 0;
      counting = true;
      try {
        await Promise.all(Array.from({ length: 20 }, () => call(t.url(`/api/v1/files/${id}`), { key: reader })));
        await eventually(async () => lastUsedWrites().length, (n) => n > 0);
      } finally {
        counting = false;
      }
      expect(lastUsedWrites()).to.have.length(1);
      // The write is seen when it is sent, off the request's path: the list shows it once it is done.
      const lastUsed = async () => (await call(t.url('/api/v1/keys'), { key: apiKey })).body.keys.find((k: { name: string }) => k.name === 'reader').last_used_at;
      expect(await eventually(lastUsed, (v) => v !== null)).to.be.a('string');
    });

    it('when a file is read by its id with a warm key, then each request is one statement, as before keys had scopes', async () => {
      const { apiKey } = await t.account();
      const id = (await uploadFile(t.baseUrl, apiKey, 'b.txt', 'b')).body.file_id as number;
      await eventually(async () => (await call(t.url('/api/v1/keys'), { key: apiKey })).body.keys[0].last_used_at, (v) => v !== null);
      seen.length = 0;
      counting = true;
      try {
        for (let i = 0; i < 20; i++) expect((await call(t.url(`/api/v1/files/${id}`), { key: apiKey })).status).to.equal(200);
      } finally {
        counting = false;
      }
      expect(seen, seen.join('\n')).to.have.length(20);
      expect(seen.every((s) => /^SELECT/.test(s))).to.equal(true);
    });
  });
}
