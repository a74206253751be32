// Starts a server from the build (dist/) with the environment it is given,
// prints how the start ended, closes a server that started, and never calls
// process.exit: the process ends only when nothing keeps it alive, which is
// what test/faults/failed-start.test.ts asserts of a start that fails.
import { pino } from 'pino';
import { loadConfig } from '../../dist/config.js';
import { createLogger } from '../../dist/server.js';
import { startServer } from '../../dist/start.js';

// A synchronous destination: the logger's own periodic flush must not be what keeps the process up.
const logger = createLogger('warn', 'json', pino.destination({ dest: 2, sync: true }));
try {
  const server = await startServer(loadConfig(process.env), logger);
  console.log('started');
  await server.close(0);
  console.log('closed');
} catch (err) {
  console.log(`failed: ${err.message}`);
}
