// Mocha root hooks, loaded by every mocharc with `require`. afterAll runs once
// after the whole run, and in parallel mode once after each file in its
// worker: a hook registered by a helper module with a bare after() would run
// only after the first file its worker loaded (the module is evaluated once
// per process), closing the shared servers under the files that follow.
import { closeSharedServers } from './shared.js';

export const mochaHooks = {
  async afterAll() {
    await closeSharedServers();
  },
};
