// Notices between the instances of one deployment, on named channels: tus
// release requests (src/tus/locker.ts), ended links and files for downloads
// in flight (src/links/live-downloads.ts), changes to API key callers
// (src/accounts/caller-changes.ts). One carrier per instance, built by the
// composition root, so an instance holds one listening connection for all of
// them (three before: one per user). Every instance hears every notice of a
// channel, its own included; a user must bear hearing its own, and hearing
// one twice.
//
// A notice is a hint, never the only way a fact arrives: a lost one costs
// seconds (a lease or a cache entry runs out, a check of the links comes
// round), so nothing is queued or replayed after an outage; a channel that
// cares is told it may have missed some (onMissed).

/** Sends a notice to every instance listening on the channel. */
export type Publish = (message: string) => Promise<unknown>;

export interface ChannelOptions {
  /** After the listening connection came back: notices sent while it was away are lost. */
  onMissed?: () => void;
}

/** How notices travel: Redis pub/sub, PostgreSQL LISTEN/NOTIFY, or this process alone. */
export interface NoticeTransport {
  /** What the start line and the logs call it. */
  readonly kind: 'redis' | 'postgresql' | 'in-process';
  /** Starts listening on every channel at once, and again after every reconnection. */
  listen(channels: string[], deliver: (channel: string, message: string) => void, onMissed: () => void): Promise<void>;
  publish(channel: string, message: string): Promise<unknown>;
  close(): Promise<void>;
}

interface Channel {
  onMessage: (message: string) => void;
  onMissed?: () => void;
}

export class NoticeCarrier {
  private readonly channels = new Map<string, Channel>();
  private started = false;

  constructor(private readonly transport: NoticeTransport) {}

  get kind(): NoticeTransport['kind'] {
    return this.transport.kind;
  }

  /**
   * Listens on channel `name` (a short word: `upload-release`) and returns
   * how to send on it. Channels are named before start(): the one
   * connection subscribes to them together.
   */
  channel(name: string, onMessage: (message: string) => void, { onMissed }: ChannelOptions = {}): Publish {
    if (this.started) throw new Error(`notice channel ${name} named after the carrier started`);
    if (!/^[a-z][a-z0-9-]*$/.test(name)) throw new Error(`notice channel ${name}: lowercase letters, digits and dashes only`);
    if (this.channels.has(name)) throw new Error(`notice channel ${name} has a listener already`);
    this.channels.set(name, { onMessage, onMissed });
    return (message) => this.transport.publish(name, message);
  }

  /** Connects the one listening connection and subscribes it to every channel named so far. */
  async start(): Promise<void> {
    this.started = true;
    await this.transport.listen(
      [...this.channels.keys()],
      (name, message) => this.channels.get(name)?.onMessage(message),
      () => this.channels.forEach((channel) => channel.onMissed?.()),
    );
  }

  close(): Promise<void> {
    return this.transport.close();
  }
}

/** One instance (the embedded database): a notice reaches this process's listener, after the current turn as it would over a network. */
export function inProcessTransport(): NoticeTransport {
  let deliver: ((channel: string, message: string) => void) | undefined;
  return {
    kind: 'in-process',
    listen: async (_channels, onNotice) => void (deliver = onNotice),
    publish: async (channel, message) => void setImmediate(() => deliver?.(channel, message)),
    close: async () => void (deliver = undefined),
  };
}
