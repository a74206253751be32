import { expect } from 'chai';
import { CallerCache } from '../../src/accounts/caller-cache.js';
import { applyCallerChange } from '../../src/accounts/caller-changes.js';
import type { Caller } from '../../src/accounts/service.js';

const plan = (name: string) => ({ name, apiAccess: true, requestsPerMinute: 50, requestsPerDay: 5000, maxFileSize: 10, dailyUploads: 5, concurrentUploads: null, maxTotalSize: null, maxExpiresIn: null });
const caller = (accountId: number, planName = 'pro'): Caller => ({ accountId, plan: plan(planName) });

describe('CallerCache', () => {
  let now: number;
  let cache: CallerCache;
  beforeEach(() => {
    now = 1_000_000;
    cache = new CallerCache({ ttlMs: 1000, maxEntries: 3, clock: () => now });
  });

  it('when an entry is older than the TTL, then it is gone', () => {
    cache.set('k1', caller(1), cache.generation);
    now += 999;
    expect(cache.get('k1')).to.deep.equal(caller(1));
    now += 1;
    expect(cache.get('k1')).to.equal(undefined);
  });

  it('when a change arrives while a lookup is in flight, then what the lookup read is not cached', () => {
    const generation = cache.generation;
    cache.forgetAccount(99); // any change, even of another account
    cache.set('k1', caller(1), generation);
    expect(cache.get('k1')).to.equal(undefined);
  });

  it("when an account or a plan changes, then only that account's or plan's entries go", () => {
    cache.set('a1', caller(1, 'pro'), cache.generation);
    cache.set('a2', caller(2, 'pro'), cache.generation);
    cache.set('a3', caller(3, 'business'), cache.generation);
    cache.forgetAccount(1);
    expect([cache.get('a1'), cache.get('a2'), cache.get('a3')].map((c) => c?.accountId)).to.deep.equal([undefined, 2, 3]);
    cache.forgetPlan('pro');
    expect([cache.get('a2'), cache.get('a3')].map((c) => c?.accountId)).to.deep.equal([undefined, 3]);
  });

  it('when it is full, then expired entries go first, then the oldest', () => {
    cache.set('old', caller(1), cache.generation);
    now += 600;
    cache.set('b', caller(2), cache.generation);
    cache.set('c', caller(3), cache.generation);
    now += 500; // 'old' has expired
    cache.set('d', caller(4), cache.generation);
    expect(['old', 'b', 'c', 'd'].map((k) => cache.get(k)?.accountId)).to.deep.equal([undefined, 2, 3, 4]);
    cache.set('e', caller(5), cache.generation);
    expect(['b', 'c', 'd', 'e'].map((k) => cache.get(k)?.accountId)).to.deep.equal([undefined, 3, 4, 5]);
  });

  it('when a published change is applied, then it forgets what it names, and anything unreadable empties the cache', () => {
    cache.set('a1', caller(1, 'pro'), cache.generation);
    cache.set('a2', caller(2, 'business'), cache.generation);
    applyCallerChange(cache, JSON.stringify({ plan: 'business' }));
    expect(cache.get('a2')).to.equal(undefined);
    expect(cache.get('a1')?.accountId).to.equal(1);
    applyCallerChange(cache, 'not json');
    expect(cache.get('a1')).to.equal(undefined);
  });
});
