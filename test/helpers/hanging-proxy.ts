// A TCP proxy in front of a store that can hang: while hung it accepts
// connections and keeps every socket open, but forwards nothing either way
// (a store that stops answering, as Ceph RGW does when full). recover()
// cuts the hung connections and forwards new ones again.
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface HangingProxy {
  endpoint: string;
  /** Stops forwarding on every open and new connection. */
  hang(): void;
  /** Cuts the hung connections; new ones are forwarded. */
  recover(): void;
  close(): Promise<void>;
}

export async function startHangingProxy(target: string): Promise<HangingProxy> {
  const { hostname, port } = new URL(target);
  const pairs = new Set<[Socket, Socket | undefined]>();
  let hung = false;
  const freeze = ([client, upstream]: [Socket, Socket | undefined]) => {
    client.removeAllListeners('data');
    upstream?.removeAllListeners('data');
    client.pause();
    upstream?.pause();
  };
  const server = createServer((client) => {
    client.on('error', () => {});
    if (hung) {
      // Accepted, never answered.
      const pair: [Socket, undefined] = [client, undefined];
      pairs.add(pair);
      client.pause();
      client.on('close', () => pairs.delete(pair));
      return;
    }
    const upstream = connect(Number(port), hostname);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    upstream.on('error', () => {});
    for (const socket of pair) {
      socket.on('close', () => {
        pairs.delete(pair);
        client.destroy();
        upstream.destroy();
      });
    }
    // Backpressure both ways, so nothing piles up inside the proxy.
    client.on('data', (chunk: Buffer) => {
      if (!upstream.write(chunk)) client.pause();
    });
    upstream.on('drain', () => !hung && client.resume());
    upstream.on('data', (chunk: Buffer) => {
      if (!client.write(chunk)) upstream.pause();
    });
    client.on('drain', () => !hung && upstream.resume());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const proxy: HangingProxy = {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hang() {
      hung = true;
      for (const pair of pairs) freeze(pair);
    },
    recover() {
      hung = false;
      for (const [client, upstream] of pairs) {
        client.destroy();
        upstream?.destroy();
      }
      pairs.clear();
    },
    async close() {
      proxy.recover();
      server.close();
      await once(server, 'close');
    },
  };
  return proxy;
}
