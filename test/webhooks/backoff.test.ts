// The wait between tries of a webhook delivery (src/webhooks/relay.ts):
// from 1 s, doubling, capped at WEBHOOK_MAX_BACKOFF, with "equal jitter"
// (between half and all of the step), so retries of many messages spread out.
import { expect } from 'chai';
import { backoffMs } from '../../src/webhooks/relay.js';

describe('webhook backoff', () => {
  it('when tries fail one after another, then the wait doubles from 1 s up to the cap', () => {
    const most = (attempts: number) => backoffMs(attempts, 1000, 300_000, () => 1);
    expect([1, 2, 3, 4, 5, 9, 10, 50, 1000].map(most)).to.deep.equal([1000, 2000, 4000, 8000, 16_000, 256_000, 300_000, 300_000, 300_000]);
  });

  it('when the jitter draws its extremes, then the wait is between half and all of the step', () => {
    expect(backoffMs(3, 1000, 300_000, () => 0)).to.equal(2000);
    expect(backoffMs(3, 1000, 300_000, () => 0.999999)).to.be.within(3999, 4000);
    expect(backoffMs(40, 1000, 300_000, () => 0)).to.equal(150_000);
  });

  it('when many messages fail at once, then their next tries spread over the step instead of one instant', () => {
    const waits = new Set(Array.from({ length: 200 }, () => backoffMs(4, 1000, 300_000)));
    expect(waits.size).to.be.greaterThan(100);
    for (const w of waits) expect(w).to.be.within(4000, 8000);
  });
});
