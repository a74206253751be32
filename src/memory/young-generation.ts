// V8 grows its young generation when much of what it allocates survives a
// scavenge. Loading a server's modules is exactly that (compiled code,
// module records and sources, all kept), and so is a long upload (the
// survivors V8 counts add up over the whole transfer): either grows it to
// sizes that are touched once and then stay resident, for no gain. Only a
// high request rate gains from a large young generation (fewer of a
// request's objects outlive a scavenge and get promoted: bin/dropstream.js
// sets its ceiling for the metadata routes). So the growth factor is held at
// 1 while the server starts, and afterwards V8's own (2) applies only while
// requests come at GROW_AT_PER_SECOND or faster. The flag is read at each
// growth, so a change at run time takes effect, where node's command line
// did not hold the start. Figures: docs/performance.md, Memory knobs.
import type { Server } from 'node:http';
import { setFlagsFromString } from 'node:v8';
import { countRequests } from './request-count.js';

const FLAG = '--semi-space-growth-factor';
const V8_DEFAULT = 2;

/** Whether the operator set the factor (node flags or NODE_OPTIONS): then it is theirs, and left alone. */
function operatorSet(): boolean {
  const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  return given.some((arg) => arg.replaceAll('_', '-').startsWith(FLAG));
}

/** Holds V8's young generation at its starting size; the returned function lets it grow again. */
export function holdYoungGeneration(): () => void {
  if (operatorSet()) return () => {};
  setFlagsFromString(`${FLAG}=1`);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    setFlagsFromString(`${FLAG}=${V8_DEFAULT}`);
  };
}

/** Requests per second from which the young generation may grow. */
export const GROW_AT_PER_SECOND = 100;

/**
 * Lets the young generation grow only in seconds in which `servers` receive
 * at least `perSecond` requests (health probes, `ignorePaths`, do not count);
 * otherwise holds it at the size it has. Returns the function that stops
 * following the load and gives V8 its own factor back.
 */
export function growYoungGenerationWithLoad(servers: Server[], options: { perSecond?: number; ignorePaths?: readonly string[] } = {}): () => void {
  if (operatorSet()) return () => {};
  const perSecond = options.perSecond ?? GROW_AT_PER_SECOND;
  const requests = countRequests(servers, options.ignorePaths);
  let seen = requests.total;
  let growing: boolean | undefined;
  const follow = () => {
    const busy = requests.total - seen >= perSecond;
    seen = requests.total;
    if (busy === growing) return;
    growing = busy;
    setFlagsFromString(`${FLAG}=${busy ? V8_DEFAULT : 1}`);
  };
  follow();
  const timer = setInterval(follow, 1000).unref();
  return () => {
    clearInterval(timer);
    requests.stop();
    setFlagsFromString(`${FLAG}=${V8_DEFAULT}`);
  };
}
