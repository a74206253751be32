import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { LocalObjectStore } from '../../src/storage/local.js';
import { objectStoreContract } from './object-store.contract.js';

async function tempRoot(): Promise<{ root: string; cleanup(): Promise<void> }> {
  const root = await mkdtemp(join(tmpdir(), 'dropstream-store-'));
  return { root, cleanup: () => rm(root, { recursive: true, force: true }) };
}

objectStoreContract('local', async () => {
  const { root, cleanup } = await tempRoot();
  return { store: new LocalObjectStore({ root }), cleanup };
});

describe('LocalObjectStore', () => {
  let root: string;
  let cleanup: () => Promise<void>;
  let store: LocalObjectStore;

  beforeEach(async () => {
    ({ root, cleanup } = await tempRoot());
    store = new LocalObjectStore({ root });
  });

  afterEach(() => cleanup());

  it('when a put fails, then no temporary file is left in .tmp', async () => {
    let sent = false;
    const body = new Readable({
      read() {
        if (sent) return this.destroy(new Error('boom'));
        sent = true;
        this.push(Buffer.alloc(64 * 1024));
      },
    });
    const err = await store.put('ab/cdef', body).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.have.property('message', 'boom');
    expect(await readdir(join(root, '.tmp'))).to.deep.equal([]);
    expect(await readdir(root)).to.deep.equal(['.tmp']);
  });

  for (const key of ['../escape', 'ab/../../escape', '/etc/passwd', 'ab\\cd', 'ab\0cd', '', '.tmp/x']) {
    it(`when the key is ${JSON.stringify(key)}, then every method rejects and nothing is written`, async () => {
      const body = Readable.from([Buffer.from('x')]);
      for (const attempt of [store.put(key, body), store.get(key), store.head(key), store.delete(key)]) {
        const err = await attempt.then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).to.be.instanceOf(Error).with.property('message').that.matches(/invalid object key/);
      }
      expect(body.destroyed).to.equal(true);
      expect(await readdir(root)).to.deep.equal([]);
    });
  }
});
