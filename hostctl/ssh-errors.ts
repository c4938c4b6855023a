/**
 * The errors of the SSH layer, each telling a caller what is safe to do next: whether the host key
 * changed, the host could not be reached, the command never started (retry), or it may have run.
 */
import type { ExecResult } from './ssh-exec.ts';

export class HostKeyMismatchError extends Error {
  override readonly name = 'HostKeyMismatchError';
  constructor(
    readonly host: string,
    readonly port: number,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(
      `host key of ${host}:${port} is ${actual}, expected ${expected}: refusing to connect (the host was reinstalled, or someone is in the middle)`,
    );
  }
}

export class SshConnectError extends Error {
  override readonly name = 'SshConnectError';
  constructor(
    readonly host: string,
    readonly port: number,
    cause: unknown,
  ) {
    super(`cannot connect to ${host}:${port}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** The channel could not be opened: the command never started, so it is safe to retry. */
export class SshChannelOpenError extends Error {
  override readonly name = 'SshChannelOpenError';
  constructor(cause: unknown) {
    super(`cannot open an SSH channel: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** The connection died while the command ran: whether it finished on the host is unknown. */
export class SshConnectionLostError extends Error {
  override readonly name = 'SshConnectionLostError';
  constructor(readonly command: string) {
    super(`SSH connection lost while running: ${command}`);
  }
}

export class SshCommandTimeoutError extends Error {
  override readonly name = 'SshCommandTimeoutError';
  constructor(
    readonly command: string,
    readonly timeoutMs: number,
    readonly stdout: string,
    readonly stderr: string,
  ) {
    super(`command timed out after ${timeoutMs} ms: ${command}`);
  }
}

export class SshCommandFailedError extends Error {
  override readonly name = 'SshCommandFailedError';
  constructor(
    readonly command: string,
    readonly result: ExecResult,
  ) {
    const detail = (result.stderr.trim() || result.stdout.trim()).slice(-2000);
    super(`command exited with ${result.signal ?? result.code}: ${command}${detail ? `\n${detail}` : ''}`);
  }
}
