/**
 * The per-host SSH connection pool the platform uses: reuses connections, opens more when every
 * channel slot is taken, drops dead ones and retries a command that could not open a channel.
 */
import {
  connectSsh,
  normalizeFingerprint,
  type ConnectOptions,
  type SshConnection,
  type SshTarget,
} from './ssh-connection.ts';
import { SshChannelOpenError, SshCommandFailedError } from './ssh-errors.ts';
import { exec, execStream, type ExecOptions, type ExecResult, type ExecStream } from './ssh-exec.ts';

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
    const leastLoaded = entry.conns.reduce<SshConnection | undefined>(
      (best, c) => (!best || c.load < best.load ? c : best),
      undefined,
    );
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
