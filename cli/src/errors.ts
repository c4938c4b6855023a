/**
 * An error meant for the person at the terminal: its message is printed as it is (one sentence on
 * stderr) and the process exits with `exitCode`. Anything else thrown is a bug and says so.
 */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export const describeError = (err: unknown): string => (err instanceof Error ? err.message : String(err));
