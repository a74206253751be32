// The limits a link password is checked under (src/downloads/password-guard.ts),
// on in-memory limiters, without HTTP: what a burst of reservations leaves
// on the address's count and the link's.
import { expect } from 'chai';
import { AppError } from '../../src/errors.js';
import { FailureLimits } from '../../src/limits/failure-limits.js';
import { passwordGuard } from '../../src/downloads/password-guard.js';

const codeOf = (promise: Promise<unknown>) => promise.then(() => 'allowed', (err: unknown) => (err instanceof AppError ? err.code : String(err)));

describe('password guard: the address and the link', () => {
  it('when one address sends 30 guesses at once over its limit of 2, then 2 are allowed and the link (limit 3) is not locked for it', async () => {
    const address = new FailureLimits({ name: 'link', failures: 2, windowSeconds: 60 });
    const link = new FailureLimits({ name: 'password', failures: 3, windowSeconds: 3600, lockSeconds: 3600 });
    const guard = passwordGuard({ address, link }, '5.10.1.1');
    const outcomes = await Promise.all(Array.from({ length: 30 }, () => codeOf(guard.reserve('link-1'))));
    expect(outcomes.filter((o) => o === 'allowed')).to.have.length(2);
    expect(outcomes.filter((o) => o === 'too_many_failures')).to.have.length(28);
    // Taken at once with the address's, the link's points passed 3 before the refused ones were given back, and locked it for an hour.
    expect(await link.waitSeconds('link-1'), 'the link is not locked').to.equal(0);
    expect(await codeOf(passwordGuard({ address, link }, '5.10.1.2').reserve('link-1'))).to.equal('allowed');
  });

  it('when a guess is right or never checked, then both points are given back; when wrong, both are kept', async () => {
    const address = new FailureLimits({ name: 'link', failures: 2, windowSeconds: 60 });
    const link = new FailureLimits({ name: 'password', failures: 2, windowSeconds: 3600, lockSeconds: 3600 });
    const guard = passwordGuard({ address, link }, '5.10.2.1');
    for (let i = 0; i < 5; i++) await (await guard.reserve('link-2'))(i % 2 ? 'right' : 'unchecked');
    expect(await address.waitSeconds('5.10.2.1')).to.equal(0);
    expect(await link.waitSeconds('link-2')).to.equal(0);
    await (await guard.reserve('link-2'))('wrong');
    await (await guard.reserve('link-2'))('wrong');
    expect(await codeOf(guard.reserve('link-2'))).to.equal('too_many_failures');
  });
});
