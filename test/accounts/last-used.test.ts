import { expect } from 'chai';
import type { PrismaClient } from '../../src/generated/prisma/client.js';
import { LastUsed } from '../../src/accounts/last-used.js';

/** A client that only counts the statements last-used sends, and the key each names. */
function countingPrisma() {
  const writes: number[] = [];
  const prisma = { $executeRaw: (_strings: TemplateStringsArray, keyId: number) => (writes.push(keyId), Promise.resolve(1)) } as unknown as PrismaClient;
  return { prisma, writes };
}

describe('last_used_at writes', () => {
  it('when a key is used all through a minute, then one statement is sent, and the next once the minute is over', () => {
    const { prisma, writes } = countingPrisma();
    let now = 1_000_000;
    const lastUsed = new LastUsed(prisma, () => now);
    for (let second = 0; second < 60; second++, now += 1000) for (let i = 0; i < 100; i++) lastUsed.touch(7);
    expect(writes).to.deep.equal([7]);
    now = 1_000_000 + 60_000;
    lastUsed.touch(7);
    lastUsed.touch(7);
    expect(writes).to.deep.equal([7, 7]);
  });

  it('when two keys are used, then each is written once a minute on its own', () => {
    const { prisma, writes } = countingPrisma();
    const lastUsed = new LastUsed(prisma, () => 5);
    for (let i = 0; i < 10; i++) {
      lastUsed.touch(1);
      lastUsed.touch(2);
    }
    expect(writes).to.deep.equal([1, 2]);
  });
});
