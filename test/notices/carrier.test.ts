// NoticeCarrier's channels, on the in-process transport (the embedded
// database's one instance); the Redis and PostgreSQL transports are driven
// by the two-instance suites (download-revoke, tus-takeover, key-cache).
import { expect } from 'chai';
import { inProcessTransport, NoticeCarrier } from '../../src/notices/carrier.js';
import { eventually } from '../helpers/raw-upload.js';

describe('NoticeCarrier', () => {
  it('when a notice is published on one channel, then only that channel hears it, this instance included', async () => {
    const carrier = new NoticeCarrier(inProcessTransport());
    const heard: string[] = [];
    const release = carrier.channel('upload-release', (message) => heard.push(`release ${message}`));
    carrier.channel('link-ended', (message) => heard.push(`ended ${message}`));
    await carrier.start();
    await release('u1');
    await eventually(async () => heard, (h) => h.length > 0);
    expect(heard).to.deep.equal(['release u1']);
    await carrier.close();
  });

  it('when a channel is named after the carrier started, or twice, then naming it throws (the one connection subscribed already)', async () => {
    const carrier = new NoticeCarrier(inProcessTransport());
    carrier.channel('caller-changes', () => {});
    expect(() => carrier.channel('caller-changes', () => {})).to.throw(/has a listener already/);
    await carrier.start();
    expect(() => carrier.channel('link-ended', () => {})).to.throw(/after the carrier started/);
    await carrier.close();
  });
});
