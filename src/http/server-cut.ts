import type { Socket } from 'node:net';

/**
 * Connections a shutdown cut at the end of its grace period (src/listener.ts,
 * drain): their requests were ended by the server, not left by the client,
 * and the request log says so (503, not 499).
 */
const cut = new WeakSet<Socket>();

export const markCutByServer = (socket: Socket) => void cut.add(socket);
export const wasCutByServer = (socket: Socket) => cut.has(socket);
