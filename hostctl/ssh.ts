/**
 * SSH client layer (ssh2) for everything the platform does on hosts: pinned host keys, exec with
 * stdin/timeouts, line streaming for logs, and a per-host connection pool with keepalive.
 *
 * Commands run through the remote user's login shell, which must be POSIX (sh, bash, dash, zsh):
 * build them with shellJoin()/shellQuote(), and send secrets over stdin, never in the command line
 * (the command line is visible in the host's process list and in logs).
 */
import { createHash } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { Client, type ClientChannel, type SyncHostVerifier } from 'ssh2';

export interface SshTarget {
  host: string;
  port?: number;
  user: string;
  /** OpenSSH or PEM private key. */
  privateKey: string | Buffer;
  passphrase?: string;
  /** `SHA256:...` (as `ssh-keygen -lf` prints it); when set, any other host key is refused. */
  expectedHostKeySha256?: string;
}

export interface ConnectOptions {
  readyTimeoutMs?: number;
  /** SSH-level keepalive; a dead peer is detected after interval × countMax. */
  keepaliveIntervalMs?: number;
  keepaliveCountMax?: number;
  /**
   * Channels open at once on one connection. OpenSSH's default MaxSessions is 10; staying below it
   * keeps a busy host from refusing channels ("open failed").
   */
  maxChannels?: number;
  /** Close the connection after this long without channels (pooled connections). */
  idleTimeoutMs?: number;
}

export class HostKeyMismatchError extends Error {
  override readonly name = 'HostKeyMismatchError';
  constructor(
    readonly host: string,
    readonly port: number,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(`host key of ${host}:${port} is ${actual}, expected ${expected}: refusing to connect (the host was reinstalled, or someone is in the middle)`);
  }
}

export class SshConnectError extends Error {
  override readonly name = 'SshConnectError';
  constructor(readonly host: string, readonly port: number, cause: unknown) {
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

/** Normalizes `SHA256:abc=`, `abc` and `abc=` to `SHA256:abc`. */
export function normalizeFingerprint(fp: string): string {
  return `SHA256:${fp.trim().replace(/^SHA256:/i, '').replace(/=+$/, '')}`;
}

/** OpenSSH-style fingerprint of a host key blob (the SSH wire encoding). */
export function fingerprintOfKey(key: Buffer): string {
  return normalizeFingerprint(createHash('sha256').update(key).digest('base64'));
}

/** Quotes one argument for a POSIX shell: plain words stay as they are, the rest go in single quotes. */
export function shellQuote(arg: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(arg)) return arg;
  // Inside single quotes nothing is special except the quote itself: close, escape it, reopen.
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

export function shellJoin(args: readonly string[]): string {
  return args.map(shellQuote).join(' ');
}

export class SshConnection {
  readonly client: Client;
  readonly target: SshTarget;
  readonly host: string;
  readonly port: number;
  /** The host key seen on connect, to pin on later connections. */
  readonly hostKeySha256: string;
  readonly maxChannels: number;
  private active = 0;
  private readonly waiters: Array<() => void> = [];
  private idleTimer: NodeJS.Timeout | undefined;
  private readonly idleTimeoutMs: number | undefined;
  private isClosed = false;
  private readonly closeListeners: Array<() => void> = [];
  lastError: Error | undefined;

  constructor(client: Client, target: SshTarget, hostKeySha256: string, options: ConnectOptions) {
    this.client = client;
    this.target = target;
    this.host = target.host;
    this.port = target.port ?? 22;
    this.hostKeySha256 = hostKeySha256;
    this.maxChannels = options.maxChannels ?? 8;
    this.idleTimeoutMs = options.idleTimeoutMs;
    // ssh2 throws unhandled 'error' events; the 'close' that follows does the cleanup.
    client.on('error', (err: Error) => {
      this.lastError = err;
    });
    client.on('close', () => this.markClosed());
    this.armIdleTimer();
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Channels in use plus callers waiting for one. */
  get load(): number {
    return this.active + this.waiters.length;
  }

  onClose(listener: () => void): void {
    if (this.isClosed) listener();
    else this.closeListeners.push(listener);
  }

  /** Waits for a free channel slot; the returned function gives it back (once). */
  async acquireChannel(): Promise<() => void> {
    if (this.isClosed) throw new SshChannelOpenError(this.lastError ?? new Error('connection closed'));
    if (this.active >= this.maxChannels) {
      await new Promise<void>((resolve) => this.waiters.push(resolve));
      if (this.isClosed) throw new SshChannelOpenError(this.lastError ?? new Error('connection closed'));
    } else {
      this.active++;
    }
    clearTimeout(this.idleTimer);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      // The slot passes straight to the next waiter, so `active` stays as it is.
      if (next) next();
      else {
        this.active--;
        this.armIdleTimer();
      }
    };
  }

  close(): void {
    this.client.end();
    this.markClosed();
  }

  private armIdleTimer(): void {
    if (this.idleTimeoutMs === undefined || this.active > 0 || this.isClosed) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.active === 0) this.close();
    }, this.idleTimeoutMs);
    this.idleTimer.unref();
  }

  private markClosed(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    clearTimeout(this.idleTimer);
    // Waiters wake up, see the connection closed and fail with SshChannelOpenError.
    for (const w of this.waiters.splice(0)) w();
    for (const l of this.closeListeners.splice(0)) l();
  }
}

/**
 * Opens an authenticated connection. The host key is checked against `expectedHostKeySha256`
 * when given; either way the key seen is on the result, so a first connection can pin it.
 */
export function connectSsh(target: SshTarget, options: ConnectOptions = {}): Promise<SshConnection> {
  const port = target.port ?? 22;
  const expected = target.expectedHostKeySha256 ? normalizeFingerprint(target.expectedHostKeySha256) : undefined;
  const client = new Client();
  let seen: string | undefined;
  return new Promise((resolve, reject) => {
    let settled = false;
    // Stays attached after a failure: ssh2 may emit more than one error while it tears down.
    const onError = (err: Error): void => {
      if (settled) return;
      settled = true;
      client.end();
      if (expected && seen && seen !== expected) reject(new HostKeyMismatchError(target.host, port, expected, seen));
      else reject(new SshConnectError(target.host, port, err));
    };
    const onReady = (): void => {
      if (settled) return;
      settled = true;
      const conn = new SshConnection(client, target, seen ?? '', options);
      client.removeListener('error', onError);
      resolve(conn);
    };
    client.on('error', onError);
    client.once('ready', onReady);
    client.once('close', () => onError(new Error('connection closed during the handshake')));
    const hostVerifier: SyncHostVerifier = (key) => {
      seen = fingerprintOfKey(key);
      return expected === undefined || seen === expected;
    };
    client.connect({
      host: target.host,
      port,
      username: target.user,
      privateKey: target.privateKey,
      passphrase: target.passphrase,
      readyTimeout: options.readyTimeoutMs ?? 20_000,
      keepaliveInterval: options.keepaliveIntervalMs ?? 15_000,
      keepaliveCountMax: options.keepaliveCountMax ?? 4,
      hostVerifier,
    });
  });
}

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
    await exec(conn, `kill -KILL -- -${pgid} 2>/dev/null || kill -KILL ${pgid} 2>/dev/null; true`, { timeoutMs: 10_000 });
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
          : setTimeout(() => stop(new SshCommandTimeoutError(command, options.timeoutMs!, text(out), text(err))), options.timeoutMs);
      const onAbort = (): void => stop(options.signal?.reason instanceof Error ? options.signal.reason : new Error('aborted'));
      options.signal?.addEventListener('abort', onAbort, { once: true });

      channel.on('close', (code: number | null | undefined, signal?: string) => {
        finish(() => {
          // ssh2 closes channels without an exit status when the connection drops.
          if (code === undefined && signal === undefined) reject(new SshConnectionLostError(command));
          else resolve({ code: code ?? null, ...(signal ? { signal } : {}), stdout: text(out), stderr: text(err), truncated });
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
export async function execStream(conn: SshConnection, command: string, options: { stdin?: string | Buffer } = {}): Promise<ExecStream> {
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

export interface SshPoolOptions extends ConnectOptions {
  /** More connections open when every channel slot on the existing ones is taken. */
  maxConnectionsPerHost?: number;
}

interface PoolEntry {
  conns: SshConnection[];
  connecting: Promise<SshConnection> | undefined;
}

/**
 * Reuses connections per host (user, address, port and pinned key). Dead connections (keepalive
 * timeout, host reboot) drop out when they close; the next call connects again. Calls that could
 * not even open a channel on a dead connection are retried once on a new one.
 */
export class SshPool {
  private readonly entries = new Map<string, PoolEntry>();
  private readonly options: Required<Pick<SshPoolOptions, 'maxConnectionsPerHost'>> & SshPoolOptions;
  private closing = false;

  constructor(options: SshPoolOptions = {}) {
    this.options = { idleTimeoutMs: 5 * 60_000, ...options, maxConnectionsPerHost: options.maxConnectionsPerHost ?? 4 };
  }

  static key(target: SshTarget): string {
    const pin = target.expectedHostKeySha256 ? normalizeFingerprint(target.expectedHostKeySha256) : '';
    return `${target.user}@${target.host}:${target.port ?? 22}#${pin}`;
  }

  /** A live connection to the target with a free channel slot if there is one. */
  async get(target: SshTarget): Promise<SshConnection> {
    if (this.closing) throw new Error('the SSH pool is closed');
    const key = SshPool.key(target);
    let entry = this.entries.get(key);
    if (!entry) {
      entry = { conns: [], connecting: undefined };
      this.entries.set(key, entry);
    }
    entry.conns = entry.conns.filter((c) => !c.closed);
    const leastLoaded = entry.conns.reduce<SshConnection | undefined>((best, c) => (!best || c.load < best.load ? c : best), undefined);
    if (leastLoaded && leastLoaded.load < leastLoaded.maxChannels) return leastLoaded;
    if (entry.connecting) return entry.connecting;
    if (leastLoaded && entry.conns.length >= this.options.maxConnectionsPerHost) return leastLoaded;
    const e = entry;
    e.connecting = connectSsh(target, this.options)
      .then((conn) => {
        if (this.closing) {
          conn.close();
          throw new Error('the SSH pool is closed');
        }
        e.conns.push(conn);
        conn.onClose(() => {
          e.conns = e.conns.filter((c) => c !== conn);
        });
        return conn;
      })
      .finally(() => {
        e.connecting = undefined;
      });
    return e.connecting;
  }

  async exec(target: SshTarget, command: string, options: ExecOptions = {}): Promise<ExecResult> {
    try {
      return await exec(await this.get(target), command, options);
    } catch (err) {
      if (!(err instanceof SshChannelOpenError)) throw err;
      return exec(await this.get(target), command, options);
    }
  }

  async execOk(target: SshTarget, command: string, options: ExecOptions = {}): Promise<ExecResult> {
    const result = await this.exec(target, command, options);
    if (result.code !== 0) throw new SshCommandFailedError(command, result);
    return result;
  }

  async execStream(target: SshTarget, command: string, options: { stdin?: string | Buffer } = {}): Promise<ExecStream> {
    try {
      return await execStream(await this.get(target), command, options);
    } catch (err) {
      if (!(err instanceof SshChannelOpenError)) throw err;
      return execStream(await this.get(target), command, options);
    }
  }

  /** Connections currently open (for metrics and tests). */
  size(): number {
    let n = 0;
    for (const e of this.entries.values()) n += e.conns.filter((c) => !c.closed).length;
    return n;
  }

  /** Closes every connection; later calls fail. */
  async close(): Promise<void> {
    this.closing = true;
    const pending = [...this.entries.values()].map((e) => e.connecting?.catch(() => undefined));
    await Promise.all(pending);
    for (const e of this.entries.values()) for (const c of e.conns) c.close();
    this.entries.clear();
  }
}
