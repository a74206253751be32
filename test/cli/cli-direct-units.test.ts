// The arithmetic of `dropstream upload` straight to the store where the
// end-to-end suite (cli-direct.test.ts) does not reach: how a file is cut
// into parts, and the API's dates.
import { expect } from 'chai';
import { wireTime } from '../../src/cli/direct/api.js';
import { partsOf } from '../../src/cli/direct/upload.js';

describe('dropstream upload straight to the store: parts and dates', () => {
  it('when the size is a whole number of parts, then the last part is a whole one too, and the parts cover the file end to end', () => {
    expect(partsOf({ size: 10, part_size: 5, parts: 2 })).to.deep.equal([
      { partNumber: 1, offset: 0, size: 5 },
      { partNumber: 2, offset: 5, size: 5 },
    ]);
    const parts = partsOf({ size: 11, part_size: 5, parts: 3 });
    expect(parts.map((p) => p.size)).to.deep.equal([5, 5, 1]);
    expect(parts.at(-1)!.offset + parts.at(-1)!.size).to.equal(11);
  });

  it("when a time is in the API's format, then it is read as UTC; an ISO time is read as given; anything else is NaN", () => {
    // Read in a zone other than UTC (Node applies TZ when it changes), so local time would show.
    const zone = process.env.TZ;
    process.env.TZ = 'America/New_York';
    try {
      expect(wireTime('2026-11-29 22:00:00')).to.equal(Date.UTC(2026, 10, 29, 22, 0, 0));
      expect(wireTime('2026-11-29T22:00:00.000Z')).to.equal(Date.UTC(2026, 10, 29, 22, 0, 0));
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
    expect(wireTime(undefined)).to.be.NaN;
    expect(wireTime('soon')).to.be.NaN;
  });
});
