/**
 * SSH client layer (ssh2) for everything the platform does on hosts: pinned host keys, exec with
 * stdin/timeouts, line streaming for logs, and a per-host connection pool with keepalive.
 *
 * Commands run through the remote user's login shell, which must be POSIX (sh, bash, dash, zsh):
 * build them with shellJoin()/shellQuote(), and send secrets over stdin, never in the command line
 * (the command line is visible in the host's process list and in logs).
 *
 * This module is the layer's public face; the parts are ssh-connection.ts (connect, host-key
 * pinning), ssh-exec.ts (running commands), ssh-pool.ts, ssh-errors.ts and shell-quote.ts.
 */
export { shellJoin, shellQuote } from './shell-quote.ts';
export {
  connectSsh,
  fingerprintOfKey,
  normalizeFingerprint,
  SshConnection,
  type ConnectOptions,
  type SshTarget,
} from './ssh-connection.ts';
export {
  HostKeyMismatchError,
  SshChannelOpenError,
  SshCommandFailedError,
  SshCommandTimeoutError,
  SshConnectError,
  SshConnectionLostError,
} from './ssh-errors.ts';
export {
  exec,
  execOk,
  execStream,
  type ExecExit,
  type ExecOptions,
  type ExecResult,
  type ExecStream,
  type OutputLine,
} from './ssh-exec.ts';
export { SshPool, type SshPoolOptions } from './ssh-pool.ts';
