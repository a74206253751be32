// What the server says at start about the object store: which backstop
// removes multipart uploads nobody finished (a bucket lifecycle rule where
// the store has them, the sweep always).
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { pino } from 'pino';
import { startTestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';

/** A logger whose lines land in `lines`, parsed. */
function capturingLogger(): { logger: pino.Logger; lines: Record<string, any>[] } {
  const lines: Record<string, any>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line));
      callback();
    },
  });
  return { logger: pino({ level: 'info', base: undefined }, sink), lines };
}

describe('S3 at start: the backstop for incomplete multipart uploads', () => {
  let s3: TestS3;
  before(async () => {
    s3 = await startTestS3();
  });
  after(async () => {
    await s3.close();
  });

  it('when the server starts, then one line says whether a lifecycle rule is in force and that the sweep aborts unclaimed uploads, and nothing is logged as an error', async () => {
    const { logger, lines } = capturingLogger();
    const t = await startTestServer('pglite', { ...s3.env(s3.bucket('backstop')), GC_INTERVAL: '600' }, logger);
    await t.close();
    const said = lines.filter((line) => 'lifecycle_rule' in line);
    expect(said).to.have.length(1);
    // That line explains a store without lifecycle rules: the SDK's own error line for the same answer was noise beside it.
    expect(lines.filter((line) => line.level >= 50)).to.deep.equal([]);
    if (s3.kind === 's3rver') {
      // s3rver has no lifecycle rules at all.
      expect(said[0]).to.deep.include({ level: 30, lifecycle_rule: 'none', reason: "reading the bucket's lifecycle rules failed: 501 NotImplemented" });
      expect(said[0]!.msg).to.equal(
        "incomplete multipart uploads: no bucket lifecycle rule (reading the bucket's lifecycle rules failed: 501 NotImplemented); the sweep every 600 s aborts those unclaimed after GC_GRACE",
      );
    } else {
      expect(said[0]).to.deep.include({ level: 30, lifecycle_rule: 'set', days: 7 });
      expect(said[0]!.msg).to.equal(
        "incomplete multipart uploads: the bucket's lifecycle rule aborts them after 7 days, and the sweep every 600 s aborts those unclaimed after GC_GRACE",
      );
    }
  });
});
