// A webhook receiver over real HTTP for tests: records every request and
// verifies its signature with `standardwebhooks` (a client others wrote).
// It can answer, fail, hang, or be down (nothing listening: connection refused).
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface Received {
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  /** The parsed body. */
  event: { type: string; timestamp: string; data: Record<string, unknown> };
  /** Whether each secret given to the receiver verified the request (standardwebhooks). */
  verified: boolean[];
  at: number;
}

export type Behaviour = 'ok' | 'fail' | 'hang';

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Requests held by 'hang' whose connection is still open. */
  hanging: number;
  /** Hanging requests whose connection the sender closed, with when. */
  cut: { id: string; at: number; startedAt: number }[];
  /** The secrets each request is verified with (set once the webhook is created). */
  secrets: string[];
  behaviour: Behaviour | ((request: number) => Behaviour);
  /** Milliseconds each request is held before its answer. */
  delayMs: number;
  /** The most requests it held at once. */
  maxConcurrent: number;
  /** An answer of its own instead of 204/500 (e.g. a redirect). */
  answer?: (res: ServerResponse) => void;
  /** Stops listening: senders meet connection refused. */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  close(): Promise<void>;
}

/** Requests held at once over several receivers, and the most seen. */
export interface Gauge {
  now: number;
  max: number;
}

export async function startReceiver(port = 0, gauge: Gauge = { now: 0, max: 0 }): Promise<Receiver> {
  const sockets = new Set<Socket>();
  let count = 0;
  let concurrent = 0;
  const receiver: Receiver = {
    url: '',
    port: 0,
    received: [],
    cut: [],
    hanging: 0,
    secrets: [],
    behaviour: 'ok',
    delayMs: 0,
    maxConcurrent: 0,
    async down() {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
    async up() {
      server = listen();
      server.listen(receiver.port, '127.0.0.1');
      await once(server, 'listening');
    },
    close: () => receiver.down().catch(() => {}),
  };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const header = (name: string) => String(req.headers[name] ?? '');
    const headers = { 'webhook-id': header('webhook-id'), 'webhook-timestamp': header('webhook-timestamp'), 'webhook-signature': header('webhook-signature') };
    const verified = receiver.secrets.map((secret) => {
      try {
        new Webhook(secret).verify(body, headers);
        return true;
      } catch {
        return false;
      }
    });
    const behaviour = typeof receiver.behaviour === 'function' ? receiver.behaviour(++count) : receiver.behaviour;
    if (behaviour === 'hang') {
      const startedAt = Date.now();
      receiver.hanging++;
      res.on('close', () => {
        receiver.hanging--;
        receiver.cut.push({ id: headers['webhook-id'], at: Date.now(), startedAt });
      });
      return;
    }
    concurrent++;
    gauge.now++;
    receiver.maxConcurrent = Math.max(receiver.maxConcurrent, concurrent);
    gauge.max = Math.max(gauge.max, gauge.now);
    if (receiver.delayMs) await new Promise((r) => setTimeout(r, receiver.delayMs));
    concurrent--;
    gauge.now--;
    if (receiver.answer) return receiver.answer(res);
    receiver.received.push({ id: headers['webhook-id'], timestamp: headers['webhook-timestamp'], signature: headers['webhook-signature'], body, event: JSON.parse(body), verified, at: Date.now() });
    res.statusCode = behaviour === 'ok' ? 204 : 500;
    res.end(behaviour === 'ok' ? undefined : 'receiver says no');
  };
  const listen = () => {
    const s = createServer((req, res) => void handle(req, res).catch(() => res.destroy()));
    s.on('connection', (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    return s;
  };
  let server: Server = listen();
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  receiver.port = (server.address() as { port: number }).port;
  receiver.url = `http://127.0.0.1:${receiver.port}/hook`;
  return receiver;
}
