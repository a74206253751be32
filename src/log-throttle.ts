// Warnings that a flood would repeat per request or per connection (every
// accept failing at the descriptor limit, every request of a client that
// bypasses the proxy) are logged once per interval: one line says it, a
// thousand a second would bury the rest of the log and cost the CPU.

/** A check that is true at most once every `ms`: the first call, then the first after each interval. */
export function atMostEvery(ms: number, now: () => number = Date.now): () => boolean {
  let last = -Infinity;
  return () => {
    if (now() - last < ms) return false;
    last = now();
    return true;
  };
}
