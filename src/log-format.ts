// How `dropstream serve` writes its log when LOG_FORMAT is unset: lines a
// person reads in a terminal, JSON lines for whatever reads a pipe or a file
// (a log collector, `docker logs` without -t, systemd's journal).

export type LogFormat = 'json' | 'pretty';

/** LOG_FORMAT when set; otherwise pretty when stdout is a terminal, JSON when it is not. */
export function chooseLogFormat(setting: LogFormat | undefined, stdoutIsTTY: boolean | undefined): LogFormat {
  return setting ?? (stdoutIsTTY === true ? 'pretty' : 'json');
}
