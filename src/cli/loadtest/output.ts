/** Where the loadtest writes: the process's streams, or a test's. */
export interface Output {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}
