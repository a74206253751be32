// The running hashes an instance holds between PATCHes (src/tus/held-hashes.ts):
// what a request gets is a copy, only the row's token and byte count get
// one, and the map stays within its count and age.
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { HeldHashes } from '../../src/tus/held-hashes.js';

const hashOf = (text: string) => createHash('sha256').update(text);

describe('held hashes (tus running SHA-256 between requests)', () => {
  it('when a request continues a held hash, then it gets a copy: what it adds never reaches the held one', () => {
    const held = new HeldHashes({ maxEntries: 10, maxAgeMs: 60_000 });
    held.save('u', 't1', 3, hashOf('abc'));
    held.copy('u', 't1', 3)!.update('refused bytes');
    expect(held.copy('u', 't1', 3)!.digest('hex')).to.equal(hashOf('abc').digest('hex'));
  });

  it('when the row names another token or another byte count, then nothing is continued and the entry goes', () => {
    const held = new HeldHashes({ maxEntries: 10, maxAgeMs: 60_000 });
    held.save('u', 't1', 3, hashOf('abc'));
    expect(held.copy('u', 't2', 3)).to.equal(undefined);
    expect(held.size).to.equal(0);
    held.save('u', 't1', 3, hashOf('abc'));
    expect(held.copy('u', 't1', 4)).to.equal(undefined);
    expect(held.size).to.equal(0);
  });

  it('when more uploads are held than maxEntries, then the least recently saved goes first', () => {
    const held = new HeldHashes({ maxEntries: 2, maxAgeMs: 60_000 });
    held.save('a', 't', 1, hashOf('a'));
    held.save('b', 't', 1, hashOf('b'));
    held.save('a', 't', 2, hashOf('aa'));
    held.save('c', 't', 1, hashOf('c'));
    expect(held.size).to.equal(2);
    expect(held.copy('b', 't', 1)).to.equal(undefined);
    expect(held.copy('a', 't', 2)).to.not.equal(undefined);
    expect(held.copy('c', 't', 1)).to.not.equal(undefined);
  });

  it('when an entry is older than maxAgeMs, then it is gone', () => {
    let now = 0;
    const held = new HeldHashes({ maxEntries: 10, maxAgeMs: 1000, now: () => now });
    held.save('old', 't', 1, hashOf('a'));
    now = 600;
    held.save('young', 't', 1, hashOf('b'));
    now = 1000;
    expect(held.copy('old', 't', 1)).to.equal(undefined);
    expect(held.copy('young', 't', 1)).to.not.equal(undefined);
    expect(held.size).to.equal(1);
  });

  it('when an upload is dropped (completed, terminated, expired), then it is held no more', () => {
    const held = new HeldHashes({ maxEntries: 10, maxAgeMs: 60_000 });
    held.save('u', 't', 1, hashOf('a'));
    held.drop('u');
    expect(held.size).to.equal(0);
  });
});
