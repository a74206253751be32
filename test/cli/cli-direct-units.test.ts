// The arithmetic of `dropstream upload` straight to the store where the
// end-to-end suite (cli-direct.test.ts) does not reach: how a file is cut
// into parts, and the API's dates.
import { expect } from 'chai';
import { wireTime } from '../../src/cli/direct/api.js';
import { partsOf, partUrls } from '../../src/cli/direct/upload.js';

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

describe('dropstream upload straight to the store: part URLs', () => {
  const offer = { part_size: 5, min_part_size: 5, max_part_size: 50, max_parts: 10_000, url_seconds: 3600, expiry_seconds: 86_400 };
  const inAnHour = () => new Date(Date.now() + 3600_000).toISOString();

  /** partUrls over a service that signs whatever it is asked, recording each batch. */
  function signer(urlSeconds = offer.url_seconds) {
    const batches: number[][] = [];
    const parts = partsOf({ size: 250 * 5, part_size: 5, parts: 250 });
    const api = {
      async sign(_id: string, numbers: number[]) {
        batches.push(numbers);
        return { part_urls: numbers.map((n) => ({ part_number: n, size: 5, url: `http://store/${n}?v=${batches.length}` })), url_expires_at: inAnHour() };
      },
    };
    const urls = partUrls(api, 'up', { ...offer, url_seconds: urlSeconds }, parts, new Set([150]));
    return { urls, batches };
  }

  it('when parts past the first 100 are wanted, then they are signed in batches of up to 100 from the part asked for, skipping stored parts, one batch however many ask at once', async () => {
    const { urls, batches } = signer();
    urls.add(Array.from({ length: 100 }, (_, i) => ({ part_number: i + 1, size: 5, url: `http://store/${i + 1}?v=0` })), inAnHour());
    expect(await urls.urlFor(100, false)).to.equal('http://store/100?v=0');
    expect(batches).to.deep.equal([]);
    expect(await urls.urlFor(101, false)).to.equal('http://store/101?v=1');
    // 101..201 without 150, which the store holds: 100 numbers.
    expect(batches[0]).to.have.length(100);
    expect(batches[0]).to.not.include(150);
    expect(batches[0]!.at(-1)).to.equal(201);
    // Asked for together, the rest is one batch.
    const [a, b] = await Promise.all([urls.urlFor(202, false), urls.urlFor(250, false)]);
    expect([a, b]).to.deep.equal(['http://store/202?v=2', 'http://store/250?v=2']);
    expect(batches).to.have.length(2);
    expect(batches[1]).to.deep.equal(Array.from({ length: 49 }, (_, i) => 202 + i));
  });

  it('when a URL was refused, or is past its renewal, then it is signed anew', async () => {
    const { urls, batches } = signer();
    urls.add([{ part_number: 1, size: 5, url: 'http://store/1?v=0' }], inAnHour());
    expect(await urls.urlFor(1, true)).to.equal('http://store/1?v=1');
    // URLs that live no time at all are renewed at every use.
    const short = signer(0);
    short.urls.add([{ part_number: 1, size: 5, url: 'http://store/1?v=0' }], inAnHour());
    expect(await short.urls.urlFor(1, false)).to.equal('http://store/1?v=1');
    expect(batches).to.have.length(1);
  });
});
