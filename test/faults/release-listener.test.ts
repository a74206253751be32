// The PostgreSQL carrier of release requests (src/files/lease-release.ts)
// follows its database through an outage of any length: a NOTIFY sent after
// PostgreSQL came back reaches it. Before, it retried once, 1 s after the
// connection was lost, and never again.
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import pino from 'pino';
import { postgresCarrier, type ReleaseCarrier } from '../../src/files/lease-release.js';
import { createPrivatePostgres, describeWithPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';

describeWithPrivatePostgres('release requests over PostgreSQL LISTEN/NOTIFY', function () {
  this.timeout(60_000);
  let pg: PrivatePostgres | undefined;
  let carrier: ReleaseCarrier | undefined;
  afterEach(async () => {
    await carrier?.close();
    pg?.destroy();
  });

  it('when PostgreSQL is down for several seconds and comes back, then the listener reconnects and requests reach it again', async () => {
    pg = createPrivatePostgres();
    const heard: string[] = [];
    carrier = await postgresCarrier(pg.url, pino({ level: 'silent' }), (id) => heard.push(id));
    await carrier.publish('before');
    for (let i = 0; i < 50 && !heard.includes('before'); i++) await sleep(100);
    expect(heard).to.include('before');

    pg.stop();
    await sleep(3500); // several retries fail while it is down
    pg.start();
    let sent = false;
    for (let i = 0; i < 100 && !sent; i++) {
      sent = await carrier.publish('after').then(() => true, () => false);
      if (!sent) await sleep(100);
    }
    expect(sent, 'a NOTIFY went out within 10 s of the restart').to.equal(true);
    for (let i = 0; i < 50 && !heard.includes('after'); i++) await sleep(100);
    expect(heard).to.include('after');
  });
});
