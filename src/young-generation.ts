// V8 grows its young generation when much of what it allocates survives a
// scavenge, and loading a server's modules is exactly that: compiled code,
// module records and sources, all kept. A start grew it from 2 x 1 MiB to
// 2 x 16 MiB, all of it touched once and then left resident: about 10 MiB of
// the 121 MiB peak measured when the server says it is listening (issue 24).
// So the growth factor is held at 1 while the server starts, and V8's own
// (2) is given back once it listens; a server under load then grows its
// young generation as before (bin/dropstream.js sets its ceiling). The flag
// is read at each growth, so a change at run time takes effect; given on
// node's command line it did not hold the start (measured on Node 24).
import { setFlagsFromString } from 'node:v8';

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
