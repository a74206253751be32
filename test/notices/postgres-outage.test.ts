// The PostgreSQL transport of notices (src/notices/postgres.ts) follows its
// database through an outage of any length: a NOTIFY sent after PostgreSQL
// came back reaches it. Before, it retried once, 1 s after the connection was
// lost, and never again. Notices sent while it was away are lost, so its
// channels are told they may have missed some.
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import pino from 'pino';
import { NoticeCarrier } from '../../src/notices/carrier.js';
import { postgresTransport } from '../../src/notices/postgres.js';
import { createPrivatePostgres, describeWithPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';
import { eventually } from '../helpers/raw-upload.js';

describeWithPrivatePostgres('notices over PostgreSQL LISTEN/NOTIFY', function () {
  this.timeout(60_000);
  let pg: PrivatePostgres | undefined;
  let carrier: NoticeCarrier | undefined;
  afterEach(async () => {
    await carrier?.close();
    pg?.destroy();
  });

  it('when PostgreSQL is down for several seconds and comes back, then the listener reconnects, notices reach it again and its channel hears it may have missed some', async () => {
    pg = createPrivatePostgres();
    const heard: string[] = [];
    let missed = 0;
    carrier = new NoticeCarrier(postgresTransport(pg.url, pino({ level: 'silent' })));
    const publish = carrier.channel('upload-release', (id) => heard.push(id), { onMissed: () => missed++ });
    await carrier.start();
    await publish('before');
    await eventually(async () => heard, (h) => h.includes('before'));
    expect(heard).to.include('before');
    expect(missed, 'nothing missed before the outage').to.equal(0);

    pg.stop();
    await sleep(3500); // several retries fail while it is down
    pg.start();
    const sent = await eventually(() => publish('after').then(() => true, () => false), (ok) => ok, 10_000);
    expect(sent, 'a NOTIFY went out within 10 s of the restart').to.equal(true);
    await eventually(async () => heard, (h) => h.includes('after'));
    expect(heard).to.include('after');
    expect(missed, 'told once, on the reconnection').to.equal(1);
  });
});
