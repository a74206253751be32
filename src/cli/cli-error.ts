/** A failure the CLI prints as its one line (no stack): what went wrong and what to do. */
export class CliError extends Error {}
