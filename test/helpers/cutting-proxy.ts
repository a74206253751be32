// A TCP proxy that cuts every open connection when the bytes it has relayed
// from clients pass given counts: a network that fails mid-upload. With
// `stallAfter`, the connection that passes that count relays nothing more
// (a network that hangs); later connections pass. With `silent`, a cut
// closes only the client's side: the server's side stays open and hears
// nothing more (a laptop changing Wi-Fi, a NAT forgetting the flow).
import { once } from 'node:events';
import { createServer, connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface CuttingProxy {
  url: string;
  /** Bytes relayed from clients to the server so far. */
  relayed(): number;
  /** Cuts made so far. */
  cuts(): number;
  /** When the last cut was made (Date.now()), if any. */
  cutAt(): number | undefined;
  /** Resolves once a connection has stalled (`stallAfter`). */
  stalled(): Promise<void>;
  close(): Promise<void>;
}

export async function startCuttingProxy(
  target: string,
  cutAt: number[],
  { stallAfter, silent = false }: { stallAfter?: number; silent?: boolean } = {},
): Promise<CuttingProxy> {
  const { hostname, port } = new URL(target);
  const pending = [...cutAt].sort((a, b) => a - b);
  const sockets = new Set<Socket>();
  let relayed = 0;
  let cuts = 0;
  let lastCut: number | undefined;
  let stall: (() => void) | undefined;
  const stalled = new Promise<void>((resolve) => (stall = resolve));
  const orphans = new Set<() => void>();
  const markOrphans = () => {
    for (const orphan of orphans) orphan();
    orphans.clear();
  };
  const server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    let orphaned = false;
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => {
        sockets.delete(socket);
        if (orphaned) return;
        client.destroy();
        upstream.destroy();
      });
    }
    orphans.add(() => {
      orphaned = true;
      upstream.removeAllListeners('data');
      upstream.on('data', () => {});
    });
    client.on('data', (chunk: Buffer) => {
      relayed += chunk.length;
      if (pending.length && relayed >= pending[0]!) {
        pending.shift();
        cuts += 1;
        lastCut = Date.now();
        if (silent) {
          // Every connection open now loses its client; its server side stays, silent.
          for (const socket of [...sockets]) if (socket.remotePort !== Number(port)) socket.destroy();
          markOrphans();
          return;
        }
        for (const socket of sockets) socket.destroy();
        return;
      }
      if (stallAfter !== undefined && stall && relayed >= stallAfter) {
        stall();
        stall = undefined;
        // Read on (so the client's hang-up is seen) but relay nothing more.
        client.removeAllListeners('data');
        client.on('data', () => {});
        return;
      }
      if (!upstream.write(chunk)) client.pause();
    });
    upstream.on('drain', () => client.resume());
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    relayed: () => relayed,
    cuts: () => cuts,
    cutAt: () => lastCut,
    stalled: () => stalled,
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
