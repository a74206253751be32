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
  /** Hangs as soon as `bytes` more have been forwarded from clients to the target (a hang mid-way through a body). */
  hangAfter(bytes: number): void;
  /** Bytes forwarded from clients to the target so far (what reached the store). */
  readonly forwarded: number;
  close(): Promise<void>;
}

export async function startHangingProxy(target: string): Promise<HangingProxy> {
  const { hostname, port } = new URL(target);
  const pairs = new Set<[Socket, Socket | undefined]>();
  let hung = false;
  let forwarded = 0;
  let hangAt = Infinity;
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
      forwarded += chunk.length;
      if (!upstream.write(chunk)) client.pause();
      if (forwarded >= hangAt) proxy.hang();
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
      hangAt = Infinity;
      for (const pair of pairs) freeze(pair);
    },
    recover() {
      hung = false;
      hangAt = Infinity;
      for (const [client, upstream] of pairs) {
        client.destroy();
        upstream?.destroy();
      }
      pairs.clear();
    },
    hangAfter(bytes) {
      hangAt = forwarded + bytes;
    },
    get forwarded() {
      return forwarded;
    },
    async close() {
      proxy.recover();
      server.close();
      await once(server, 'close');
    },
  };
  return proxy;
}
