/**
 * One authenticated ssh2 connection to a host: host-key pinning (fingerprints in OpenSSH's
 * `SHA256:` form), keepalive, the cap on channels open at once and closing when idle.
 */
import { createHash } from 'node:crypto';
import { Client, type SyncHostVerifier } from 'ssh2';
import { HostKeyMismatchError, SshChannelOpenError, SshConnectError } from './ssh-errors.ts';

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

/** Normalizes `SHA256:abc=`, `abc` and `abc=` to `SHA256:abc`. */
export function normalizeFingerprint(fp: string): string {
  return `SHA256:${fp
    .trim()
    .replace(/^SHA256:/i, '')
    .replace(/=+$/, '')}`;
}

/** OpenSSH-style fingerprint of a host key blob (the SSH wire encoding). */
export function fingerprintOfKey(key: Buffer): string {
  return normalizeFingerprint(createHash('sha256').update(key).digest('base64'));
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
