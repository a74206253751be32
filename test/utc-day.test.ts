import { expect } from 'chai';
import { utcDay } from '../src/utc-day.js';

describe('utcDay', () => {
  it('when the clock crosses UTC midnight, then the next call names the new day', () => {
    expect(utcDay(new Date('2026-11-27T23:59:59.999Z'))).to.equal('2026-11-27');
    expect(utcDay(new Date('2026-11-28T00:00:00.000Z'))).to.equal('2026-11-28');
  });

  it('when the clock goes back a day (a test clock, a corrected host clock), then the earlier day is named', () => {
    expect(utcDay(new Date('2026-11-28T12:00:00Z'))).to.equal('2026-11-28');
    expect(utcDay(new Date('2026-11-27T12:00:00Z'))).to.equal('2026-11-27');
    expect(utcDay(new Date('2026-11-27T00:00:00.000Z'))).to.equal('2026-11-27');
  });

  it('when calls of one day alternate with calls of another, then each gets its own day', () => {
    for (let i = 0; i < 3; i++) {
      expect(utcDay(new Date('2026-03-01T08:00:00Z'))).to.equal('2026-03-01');
      expect(utcDay(new Date('2025-02-28T23:00:00Z'))).to.equal('2025-02-28');
    }
  });
});
