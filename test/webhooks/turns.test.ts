// Which due messages the relay sends next (src/webhooks/turns.ts, issue 50):
// accounts take turns, then their webhooks; caps per account and per webhook
// (one at a time for a webhook on probation).
import { expect } from 'chai';
import { takeTurns, type Candidate } from '../../src/webhooks/turns.js';

const message = (id: string, accountId: number, endpointId: string, probing = false): Candidate => ({ id, accountId, endpointId, probing });
const none = { accounts: new Map<number, number>(), endpoints: new Map<string, number>() };
const limits = { free: 16, perAccount: 8, perEndpoint: 4 };

describe('webhook relay turns', () => {
  it("when one account's backlog comes first, then the other account's message is taken first all the same", () => {
    const flood = Array.from({ length: 40 }, (_, i) => message(`f${i}`, 1, `wh_${i % 10}`));
    const chosen = takeTurns([...flood, message('other', 2, 'wh_other')], none, { ...limits, free: 2 });
    expect(chosen.map((c) => c.id)).to.deep.equal(['f0', 'other']);
  });

  it('when an account has its share of the slots in flight, then none of its messages is taken, however many slots are free', () => {
    const flood = Array.from({ length: 40 }, (_, i) => message(`f${i}`, 1, `wh_${i % 10}`));
    expect(takeTurns(flood, none, limits)).to.have.length(8);
    const busy = { accounts: new Map([[1, 8]]), endpoints: new Map<string, number>() };
    expect(takeTurns(flood, busy, limits)).to.deep.equal([]);
  });

  it("when an account's webhooks have messages, then its slots go round its webhooks before any takes a second", () => {
    const backlog = Array.from({ length: 8 }, (_, i) => message(`busy${i}`, 1, 'wh_busy'));
    const chosen = takeTurns([...backlog, message('quiet', 1, 'wh_quiet')], { accounts: new Map([[1, 2]]), endpoints: new Map([['wh_busy', 2]]) }, limits);
    // The busy webhook reaches its cap of 4 after two more.
    expect(chosen.map((c) => c.id)).to.deep.equal(['quiet', 'busy0', 'busy1']);
  });

  it('when accounts have sends in flight, then the one with the fewest goes first, and ties go to the oldest message', () => {
    const inFlight = { accounts: new Map([[1, 2], [2, 1]]), endpoints: new Map<string, number>() };
    const chosen = takeTurns([message('a1', 1, 'wh_a'), message('b1', 2, 'wh_b'), message('c1', 3, 'wh_c'), message('b2', 2, 'wh_b')], inFlight, { ...limits, free: 4 });
    expect(chosen.map((c) => c.id)).to.deep.equal(['c1', 'b1', 'a1', 'b2']);
  });

  it('when a webhook is on probation after timeouts, then one message at a time goes to it', () => {
    const probing = Array.from({ length: 4 }, (_, i) => message(`p${i}`, 1, 'wh_slow', true));
    expect(takeTurns(probing, none, limits).map((c) => c.id)).to.deep.equal(['p0']);
    expect(takeTurns(probing, { accounts: new Map([[1, 1]]), endpoints: new Map([['wh_slow', 1]]) }, limits)).to.deep.equal([]);
  });
});
