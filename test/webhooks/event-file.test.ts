// The file in a webhook event and the file the API answers are one table's
// (src/file-wire.ts, issue 52): they differ by the fields the table declares
// as one side's only, with a reason, and by nothing else; the fields they
// share hold the same values; and the answer schemas the OpenAPI document is
// built from (src/files/schemas.ts, src/webhooks/schemas.ts) name the same
// fields in the same order.
import { expect } from 'chai';
import { FILE_WIRE_FIELDS, wireFields } from '../../src/file-wire.js';
import { fileSchema } from '../../src/files/schemas.js';
import { eventSchemas } from '../../src/webhooks/schemas.js';
import { call, uploadFile } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { sharedServer } from '../helpers/shared.js';
import type { TestServer } from '../helpers/server.js';

/** The fields the table shows on `side` only, by name. */
const onlyOn = (side: 'api' | 'event') => FILE_WIRE_FIELDS.filter((f) => f.in.length === 1 && f.in[0] === side).map((f) => f.name);

describe('the file on the wire: the table and the schemas', () => {
  it('when a field is one side\'s only, then the table says why', () => {
    for (const f of FILE_WIRE_FIELDS) if (f.in.length === 1) expect('only' in f && f.only, f.name).to.be.a('string').that.is.not.empty;
  });

  it('when the API\'s file schema is read, then it names the table\'s API fields, in order', () => {
    expect(Object.keys(fileSchema('https://files.example').shape)).to.deep.equal(wireFields('api').map((f) => f.name));
  });

  it('when the events\' file schema is read, then it names the table\'s event fields, in order', () => {
    const file = eventSchemas.LinkExhaustedEvent.shape.data.shape.file;
    expect(Object.keys(file.shape)).to.deep.equal(wireFields('event').map((f) => f.name));
    for (const event of eventSchemas.FileEvent.options) expect(event.shape.data).to.equal(file);
  });
});

for (const backend of backends) {
  describe(`the file in a webhook event and in the API's answer (${backend})`, function () {
    this.timeout(30_000);
    let t: TestServer;
    let api: Record<string, unknown>;
    let data: Record<string, unknown>;

    before(async () => {
      t = await sharedServer(backend);
      const { apiKey: key } = await t.account();
      // Nowhere to deliver to (.invalid never resolves): the body is read from the outbox, as written.
      const hook = await call(t.url('/api/v1/webhooks'), {
        method: 'POST',
        key,
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ url: 'https://receiver.invalid/hook', events: ['file.uploaded'] }),
      });
      expect(hook.status).to.equal(201);
      const uploaded = await uploadFile(t.server.url, key, 'both sides "é".txt', 'the same file, twice');
      expect(uploaded.status).to.equal(201);
      const fileId = uploaded.body.file_id as number;
      api = (await call(t.url(`/api/v1/files/${fileId}`), { key })).body.file;
      const [message] = await t.server.db.prisma.$queryRaw<{ body: string }[]>`SELECT body FROM webhook_messages WHERE file_id = ${fileId} AND type = 'file.uploaded'`;
      data = JSON.parse(message!.body).data;
    });

    it('when a file is uploaded, then its file.uploaded data lacks only the API-only fields', () => {
      expect(Object.keys(api).filter((name) => !(name in data))).to.deep.equal(onlyOn('api'));
    });

    it('when a file is uploaded, then its file.uploaded data adds only the event-only fields', () => {
      expect(Object.keys(data).filter((name) => !(name in api)).sort()).to.deep.equal(onlyOn('event').sort());
    });

    it('when a file is uploaded, then every field both show has the same value in both', () => {
      const shared = Object.keys(api).filter((name) => name in data);
      expect(shared).to.have.length.above(5);
      for (const name of shared) expect(data[name], name).to.deep.equal(api[name]);
    });
  });
}
