import { expect } from 'chai';
import { atMostEvery } from '../src/log-throttle.js';

describe('atMostEvery (warnings a flood would repeat)', () => {
  it('when called again and again, then it is true for the first call and then once per interval', () => {
    let now = 1_000_000;
    const due = atMostEvery(1000, () => now);
    const seen: boolean[] = [];
    for (const at of [0, 1, 999, 1000, 1500, 1999, 2000, 5000]) {
      now = 1_000_000 + at;
      seen.push(due());
    }
    expect(seen).to.deep.equal([true, false, false, true, false, false, true, true]);
  });
});
