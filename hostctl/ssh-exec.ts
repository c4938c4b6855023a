/**
 * Running commands over one SSH connection: exec() collects the output, execStream() yields it
 * line by line, and both kill the command's whole process group on the host when stopped.
 */
import { PassThrough, type Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { ClientChannel } from 'ssh2';
import type { SshConnection } from './ssh-connection.ts';
import {
  SshChannelOpenError,
  SshCommandFailedError,
  SshCommandTimeoutError,
  SshConnectionLostError,
} from './ssh-errors.ts';

export interface ExecOptions {
  /** Written to the command's stdin, then EOF. Without it the command gets EOF at once. */
  stdin?: string | Buffer;
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Per stream; output past it is dropped and `truncated` set. */
  maxOutputBytes?: number;
}

export interface ExecResult {
  /** Exit status; null when the command was killed by a signal. */
  code: number | null;
  signal?: string;
  stdout: string;
  stderr: string;
  truncated: boolean;
}

function openChannel(conn: SshConnection, command: string): Promise<ClientChannel> {
  return new Promise((resolve, reject) => {
    try {
      conn.client.exec(command, (err, channel) => (err ? reject(new SshChannelOpenError(err)) : resolve(channel)));
    } catch (err) {
      // ssh2 throws synchronously when the connection is not up.
      reject(new SshChannelOpenError(err));
    }
  });
}

/*
 * Stopping a remote command. Closing the channel is not enough: sshd leaves a non-tty session's
 * processes running (they only see SIGPIPE on their next write). SSH "signal" requests do not work
 * either: OpenSSH refuses them for root logins ("session signalling requires privilege
 * separation"), and GPU hosts are mostly reached as root. But sshd starts every session's shell
 * with setsid(), so the shell's pid is the process group of everything the command starts: the
 * command reports it on its first stderr line, and a second exec kills that group.
 */
const PGID_MARK = '@@gantry-pgid:';

function killable(command: string): string {
  return `printf '${PGID_MARK}%s\\n' "$$" >&2; ${command}`;
}

/** Kills the remote process group; best effort (the connection may be gone). */
async function killRemote(conn: SshConnection, pgid: string | undefined): Promise<void> {
  if (!pgid || !/^\d+$/.test(pgid) || conn.closed) return;
  try {
    await exec(conn, `kill -KILL -- -${pgid} 2>/dev/null || kill -KILL ${pgid} 2>/dev/null; true`, {
      timeoutMs: 10_000,
    });
  } catch {
    // Nothing more can be done from here.
  }
}

/** Splits a byte stream into lines (LF or CRLF), decoding UTF-8 across chunk boundaries. */
function lineSplitter(onLine: (line: string) => void): { write(chunk: Buffer): void; end(): void } {
  const decoder = new StringDecoder('utf8');
  let buffered = '';
  const flush = (final: boolean): void => {
    let i: number;
    while ((i = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, i);
      buffered = buffered.slice(i + 1);
      onLine(line.endsWith('\r') ? line.slice(0, -1) : line);
    }
    if (final && buffered) {
      onLine(buffered);
      buffered = '';
    }
  };
  return {
    write(chunk) {
      buffered += decoder.write(chunk);
      flush(false);
    },
    end() {
      buffered += decoder.end();
      flush(true);
    },
  };
}

/**
 * Takes the pgid line off the front of a killable command's stderr and passes the rest on.
 * Until that line is complete, nothing else can have been written (it is the first command).
 */
function pgidFilter(onPgid: (pgid: string) => void, onData: (chunk: Buffer) => void): (chunk: Buffer) => void {
  let head: Buffer | undefined = Buffer.alloc(0);
  return (chunk) => {
    if (!head) return onData(chunk);
    head = Buffer.concat([head, chunk]);
    const nl = head.indexOf(0x0a);
    if (nl < 0 && head.length < 256) return;
    const first = head.subarray(0, nl < 0 ? head.length : nl).toString('utf8');
    const rest = head.subarray(nl < 0 ? head.length : nl + 1);
    head = undefined;
    if (first.startsWith(PGID_MARK)) onPgid(first.slice(PGID_MARK.length).trim());
    else onData(Buffer.from(`${first}\n`));
    if (rest.length) onData(rest);
  };
}

/**
 * Runs one command and collects its output. A non-zero exit is a result, not an error. With a
 * timeout or an abort signal the command is killed on the host (its whole process group) when
 * either fires.
 */
export async function exec(conn: SshConnection, command: string, options: ExecOptions = {}): Promise<ExecResult> {
  options.signal?.throwIfAborted();
  const canKill = options.timeoutMs !== undefined || options.signal !== undefined;
  const release = await conn.acquireChannel();
  let pgid: string | undefined;
  let kill = false;
  try {
    const channel = await openChannel(conn, canKill ? killable(command) : command);
    return await new Promise<ExecResult>((resolve, reject) => {
      const max = options.maxOutputBytes ?? 32 * 1024 * 1024;
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      const sizes = { out: 0, err: 0 };
      let truncated = false;
      const collect = (bucket: Buffer[], key: 'out' | 'err') => (chunk: Buffer) => {
        const room = max - sizes[key];
        if (chunk.length > room) truncated = true;
        if (room <= 0) return;
        const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
        bucket.push(part);
        sizes[key] += part.length;
      };
      channel.on('data', collect(out, 'out'));
      const onStderr = collect(err, 'err');
      channel.stderr.on('data', canKill ? pgidFilter((id) => (pgid = id), onStderr) : onStderr);
      const text = (b: Buffer[]): string => Buffer.concat(b).toString('utf8');

      let settled = false;
      const finish = (fn: () => void): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        fn();
      };
      const stop = (error: Error): void => {
        kill = true;
        channel.close();
        finish(() => reject(error));
      };
      const timer =
        options.timeoutMs === undefined
          ? undefined
          : setTimeout(
              () => stop(new SshCommandTimeoutError(command, options.timeoutMs!, text(out), text(err))),
              options.timeoutMs,
            );
      const onAbort = (): void =>
        stop(options.signal?.reason instanceof Error ? options.signal.reason : new Error('aborted'));
      options.signal?.addEventListener('abort', onAbort, { once: true });

      channel.on('close', (code: number | null | undefined, signal?: string) => {
        finish(() => {
          // ssh2 closes channels without an exit status when the connection drops.
          if (code === undefined && signal === undefined) reject(new SshConnectionLostError(command));
          else
            resolve({
              code: code ?? null,
              ...(signal ? { signal } : {}),
              stdout: text(out),
              stderr: text(err),
              truncated,
            });
        });
      });
      if (options.stdin !== undefined) channel.end(options.stdin);
      else channel.end();
    });
  } finally {
    release();
    // After the slot is back, so that the kill can run even when every other slot is busy.
    if (kill) await killRemote(conn, pgid);
  }
}

/** exec() that throws SshCommandFailedError unless the command exits 0. */
export async function execOk(conn: SshConnection, command: string, options: ExecOptions = {}): Promise<ExecResult> {
  const result = await exec(conn, command, options);
  if (result.code !== 0) throw new SshCommandFailedError(command, result);
  return result;
}

export interface OutputLine {
  stream: 'stdout' | 'stderr';
  line: string;
}

export interface ExecExit {
  code: number | null;
  signal?: string;
  /** True when the connection dropped before the command ended. */
  lost: boolean;
}

export interface ExecStream {
  /** Object-mode stream of OutputLine; `for await` over it. Ending the loop early stops the command. */
  lines: Readable;
  /** Settles when the channel closes; never rejects. */
  exit: Promise<ExecExit>;
  /** Kills the command on the host and ends `lines`; resolves once the kill was sent. */
  close(): Promise<void>;
}

/**
 * Runs a long command (`podman logs -f ...`) and yields its output line by line, stdout and stderr
 * interleaved in arrival order. A slow reader pauses the channel, so SSH flow control holds the
 * remote side back instead of memory filling up here.
 */
export async function execStream(
  conn: SshConnection,
  command: string,
  options: { stdin?: string | Buffer } = {},
): Promise<ExecStream> {
  const release = await conn.acquireChannel();
  let channel: ClientChannel;
  try {
    channel = await openChannel(conn, killable(command));
  } catch (err) {
    release();
    throw err;
  }
  let pgid: string | undefined;
  let closed = false;
  const lines = new PassThrough({ objectMode: true, highWaterMark: 1000 });
  const push = (item: OutputLine): void => {
    if (lines.destroyed || lines.writableEnded) return;
    if (!lines.write(item)) {
      channel.pause();
      channel.stderr.pause();
    }
  };
  lines.on('drain', () => {
    channel.resume();
    channel.stderr.resume();
  });
  const out = lineSplitter((line) => push({ stream: 'stdout', line }));
  const err = lineSplitter((line) => push({ stream: 'stderr', line }));
  channel.on('data', (c: Buffer) => out.write(c));
  channel.stderr.on(
    'data',
    pgidFilter(
      (id) => (pgid = id),
      (c) => err.write(c),
    ),
  );

  const exit = new Promise<ExecExit>((resolve) => {
    channel.on('close', (code: number | null | undefined, signal?: string) => {
      closed = true;
      out.end();
      err.end();
      release();
      if (!lines.destroyed && !lines.writableEnded) lines.end();
      const lost = code === undefined && signal === undefined;
      resolve({ code: code ?? null, ...(signal ? { signal } : {}), lost });
    });
  });
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (!lines.destroyed && !lines.writableEnded) lines.end();
      if (closed) return;
      // A paused channel never reaches 'end', and ssh2 only reports 'close' after it.
      channel.resume();
      channel.stderr.resume();
      channel.close();
      await killRemote(conn, pgid);
    })();
    return stopping;
  };
  // A reader that stops early (break out of for-await) destroys `lines`: stop the command too.
  lines.on('close', () => void stop());
  if (options.stdin !== undefined) channel.end(options.stdin);
  else channel.end();
  return { lines, exit, close: stop };
}
