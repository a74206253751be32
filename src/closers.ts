/**
 * What a start has opened, to be closed in reverse order: by close() after a
 * normal run, and by a start that fails half-way, so a failed start leaves no
 * listener, timer or connection behind (Fastify's onClose hooks, as one list).
 * Each step of a start adds its closer as soon as the thing exists.
 */
export class Closers {
  private readonly list: { name: string; close: () => unknown }[] = [];

  add(name: string, close: () => unknown): void {
    this.list.push({ name, close });
  }

  /** Runs every closer, the last added first; one that fails is reported and the others still run. */
  async closeAll(onError: (name: string, err: unknown) => void): Promise<void> {
    for (let next = this.list.pop(); next; next = this.list.pop()) {
      try {
        await next.close();
      } catch (err) {
        onError(next.name, err);
      }
    }
  }
}
