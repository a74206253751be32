// Clients that poll one URL back to back over keep-alive connections, as a
// proxy's pooled connections or a dashboard do: what each request got, to
// see what a shutdown does to requests that cross it (issue 51).
import { Agent, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

/** One request's outcome: an answer (its status and Connection header), or the error the client saw instead. */
export type Poll = { status: number; connection?: string } | { error: string };

export interface Pollers {
  /** Every outcome so far, per poller. */
  polls: Poll[][];
  /** Resolves once every poller has had `answers` answers. */
  warmedUp(answers?: number): Promise<void>;
  /** Resolves when every poller has stopped: after an answer that closes its connection, or an error. */
  done: Promise<void>;
  /** Stops every poller after its request in flight (for a clean-up). */
  stop(): void;
}

function poll(url: string, agent: Agent): Promise<Poll> {
  return new Promise((resolve) => {
    request(url, { agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection }));
      res.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
    })
      .on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }))
      .end();
  });
}

/**
 * `count` pollers, each on a keep-alive connection of its own. A poller stops
 * after an answer that says `Connection: close` (the server is going: a
 * client goes elsewhere) or after an error (ECONNRESET, "socket hang up",
 * ECONNREFUSED: a request that got no answer).
 */
export function startPollers(url: string, count = 6): Pollers {
  const agent = new Agent({ keepAlive: true, maxSockets: count });
  const polls: Poll[][] = Array.from({ length: count }, () => []);
  let stopping = false;
  const done = Promise.all(
    polls.map(async (mine) => {
      while (!stopping) {
        const outcome = await poll(url, agent);
        mine.push(outcome);
        if ('error' in outcome || outcome.connection === 'close') break;
      }
    }),
  ).then(() => agent.destroy());
  return {
    polls,
    async warmedUp(answers = 5) {
      while (!polls.every((mine) => mine.length >= answers)) await sleep(5);
    },
    done,
    stop: () => void (stopping = true),
  };
}

/** What went wrong for the pollers: each error, and each poller whose last answer did not close its connection. */
export function unanswered(polls: Poll[][]): string[] {
  const wrong: string[] = [];
  polls.forEach((mine, i) => {
    for (const outcome of mine) if ('error' in outcome) wrong.push(`poller ${i}, request ${mine.indexOf(outcome) + 1} of ${mine.length}: ${outcome.error}`);
    const last = mine.at(-1);
    if (last && 'status' in last && last.connection !== 'close') wrong.push(`poller ${i}: its last answer kept the connection (${last.connection})`);
  });
  return wrong;
}
