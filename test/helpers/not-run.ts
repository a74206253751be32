// What did not run for want of a service, said again after mocha's summary:
// the notes printed when a helper loads scroll away under ~700 lines, and the
// summary alone ("671 passing") looks complete. Helpers call notRun(); the
// lines are written when the process exits (mocha's `exit: true`), after the
// summary.
const missing: string[] = [];

export function notRun(what: string, howToRun: string): void {
  const line = `  NOTE: ${what} did NOT run; to run it: ${howToRun}`;
  console.warn(`\n${line}\n`);
  if (missing.length === 0) {
    process.once('exit', () => {
      process.stderr.write(`\n  Did not run:\n${missing.map((l) => `  ${l.trim()}\n`).join('')}\n`);
    });
  }
  missing.push(line);
}
