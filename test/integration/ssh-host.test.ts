/**
 * The host layer against real parts: an OpenSSH server on loopback, ssh2, Podman with runc, and a
 * locally built image. Nothing here is mocked; the suite installs what it needs (Debian packages)
 * and removes the containers and the server it started.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes, createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { tmpdir, totalmem } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeHost } from '../../activities/host-probe.ts';
import {
  connectSsh,
  exec,
  execOk,
  execStream,
  HostKeyMismatchError,
  shellJoin,
  SshCommandTimeoutError,
  SshConnectionLostError,
  SshPool,
  type OutputLine,
  type SshConnection,
  type SshTarget,
} from '../../hostctl/ssh.ts';
import { startSshTestHost, type SshTestHost } from '../support/ssh-test-host.ts';
import { ensureTestWorkerImage } from '../support/test-image.ts';

const IMAGE = 'localhost/gantry-test-ssh-host:1';
const LABEL = 'io.gantry.test=ssh-host';

let host: SshTestHost;
let target: SshTarget;
let conn: SshConnection;
let appDir: string;
const containers: string[] = [];
const pools: SshPool[] = [];

function containerName(): string {
  const name = `gantry-ssh-test-${randomBytes(4).toString('hex')}`;
  containers.push(name);
  return name;
}

function listen(
  handler: (req: IncomingMessage, body: string) => { status: number; headers?: Record<string, string>; body?: string },
): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const r = handler(req, body);
      res.writeHead(r.status, r.headers);
      res.end(r.body ?? '');
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as { port: number }).port })),
  );
}

beforeAll(async () => {
  host = await startSshTestHost();
  target = { host: host.host, port: host.port, user: host.user, privateKey: host.privateKey };
  conn = await connectSsh(target);
  appDir = mkdtempSync(path.join(tmpdir(), 'gantry-test-app-'));
  writeFileSync(path.join(appDir, 'index.js'), "console.log('worker app up');\n");
  writeFileSync(
    path.join(appDir, 'digest-stdin.js'),
    "const h = require('node:crypto').createHash('sha256');\nprocess.stdin.on('data', (c) => h.update(c)).on('end', () => console.log(h.digest('hex')));\n",
  );
}, 600_000);

afterAll(async () => {
  if (conn && !conn.closed && containers.length)
    await exec(conn, shellJoin(['podman', 'rm', '--force', '--time', '0', '--ignore', ...containers]), {
      timeoutMs: 60_000,
    }).catch(() => undefined);
  for (const pool of pools) await pool.close();
  conn?.close();
  await host?.stop();
  if (appDir) rmSync(appDir, { recursive: true, force: true });
}, 120_000);

describe('SSH test host and client', () => {
  it('pins the host key: the first key is reported, a different expected key is refused', async () => {
    expect(conn.hostKeySha256).toBe(host.hostKeySha256);
    const pinned = await connectSsh({ ...target, expectedHostKeySha256: host.hostKeySha256.replace(/^SHA256:/, '') });
    pinned.close();

    const wrong = `SHA256:${createHash('sha256').update('another host').digest('base64').replace(/=+$/, '')}`;
    const err = await connectSsh({ ...target, expectedHostKeySha256: wrong }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HostKeyMismatchError);
    expect(err).toMatchObject({ expected: wrong, actual: host.hostKeySha256, port: host.port });
  });

  it('refuses a key that is not authorized', async () => {
    const other = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(appDir, 'stranger')]);
    expect(other.status).toBe(0);
    await expect(
      connectSsh({ ...target, privateKey: readFileSync(path.join(appDir, 'stranger'), 'utf8') }),
    ).rejects.toThrow(/authentication/i);
    rmSync(path.join(appDir, 'stranger'));
    rmSync(path.join(appDir, 'stranger.pub'));
  });

  it('runs commands: exit codes, stderr, stdin, and arguments quoted for the shell', async () => {
    expect(await exec(conn, 'cat; echo oops >&2; exit 3', { stdin: 'from stdin' })).toEqual({
      code: 3,
      stdout: 'from stdin',
      stderr: 'oops\n',
      truncated: false,
    });
    const nasty = [
      "it's",
      '$(touch /tmp/pwned)',
      'a b',
      '"dq"',
      'back\\slash',
      'new\nline',
      '',
      '*',
      '~',
      '--flag=x',
      'üñï ✓',
      '`id`',
      ';',
      '&&',
      '|',
      '#',
    ];
    const r = await execOk(conn, shellJoin(['printf', '%s\\0', ...nasty]));
    expect(r.stdout.split('\0').slice(0, -1)).toEqual(nasty);
  });

  it('kills the remote command when it times out', async () => {
    const marker = `gantry-timeout-${randomBytes(4).toString('hex')}`;
    const started = Date.now();
    // 2 s leaves a loaded 2-core machine time to start the shell and print before the deadline.
    const err = await exec(conn, `sh -c 'echo started; sleep 300; : ${marker}'`, { timeoutMs: 2000 }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SshCommandTimeoutError);
    expect((err as SshCommandTimeoutError).stdout).toBe('started\n');
    expect(Date.now() - started).toBeLessThan(8000);
    // The bracket keeps pgrep's own command line from matching.
    const left = await exec(conn, `pgrep -f '[${marker[0]}]${marker.slice(1)}' || true`);
    expect(left.stdout.trim()).toBe('');
  });

  it('reports a connection lost mid-command', async () => {
    const c = await connectSsh(target);
    const running = exec(c, 'sleep 30');
    setTimeout(() => c.client.destroy(), 200);
    await expect(running).rejects.toBeInstanceOf(SshConnectionLostError);
    expect(c.closed).toBe(true);
  });

  it('probes the host: CPUs, memory, disk, Podman, no GPUs', async () => {
    const probe = await probeHost(conn);
    const nproc = Number(spawnSync('nproc', { encoding: 'utf8' }).stdout.trim());
    expect(probe.cpuCount).toBe(nproc);
    expect(Math.abs(probe.memoryMb - Math.floor(totalmem() / 1024 / 1024))).toBeLessThanOrEqual(1);
    expect(probe.diskFreeGb).toBeGreaterThan(0);
    expect(probe.containerRuntime).toMatchObject({ name: 'podman', usable: true });
    expect(probe.containerRuntime?.version).toMatch(/^\d+\.\d+/);
    expect(probe.diskPath).toBe(probe.containerRuntime?.rootDir);
    expect(probe.uid).toBe(0);
    const hasNvidiaSmi = spawnSync('sh', ['-c', 'command -v nvidia-smi']).status === 0;
    if (!hasNvidiaSmi) {
      expect(probe.gpus).toEqual([]);
      expect(probe.gpuError).toBeUndefined();
      expect(probe.gpuPassthrough.method).toBe('none');
    }
  });

  it('builds the test image and runs a container over SSH', async () => {
    const image = ensureTestWorkerImage(IMAGE, { appDir });
    console.info(`test image ${image.built ? 'built' : 'already there'} in ${image.ms} ms`);
    expect(ensureTestWorkerImage(IMAGE, { appDir }).built).toBe(false);

    let started = Date.now();
    const r = await execOk(
      conn,
      shellJoin([
        'podman',
        'run',
        '--rm',
        '--label',
        LABEL,
        IMAGE,
        'node',
        '-e',
        'console.log(1 + 1, process.version)',
      ]),
      { timeoutMs: 60_000 },
    );
    console.info(`podman run --rm over SSH: ${Date.now() - started} ms`);
    expect(r.stdout.trim()).toBe(`2 ${process.version}`);

    // The image's default command runs the app copied to /app.
    started = Date.now();
    expect(
      (await execOk(conn, shellJoin(['podman', 'run', '--rm', '--label', LABEL, IMAGE]), { timeoutMs: 60_000 })).stdout,
    ).toBe('worker app up\n');
    console.info(`podman run --rm (default CMD) over SSH: ${Date.now() - started} ms`);
  });

  it('lets a container reach an HTTP server on the host loopback with --network host', async () => {
    ensureTestWorkerImage(IMAGE, { appDir });
    const { server, port } = await listen((req) => ({ status: 200, body: `hello ${req.url}` }));
    try {
      const script =
        'fetch(process.argv[1]).then((r) => r.text()).then(console.log, (e) => { console.error(e); process.exit(1); })';
      const r = await execOk(
        conn,
        shellJoin([
          'podman',
          'run',
          '--rm',
          '--network',
          'host',
          '--label',
          LABEL,
          IMAGE,
          'node',
          '-e',
          script,
          `http://127.0.0.1:${port}/ping`,
        ]),
        { timeoutMs: 60_000 },
      );
      expect(r.stdout.trim()).toBe('hello /ping');
    } finally {
      server.close();
    }
  });

  it('passes secrets over stdin: into a container, and to podman login --password-stdin', async () => {
    ensureTestWorkerImage(IMAGE, { appDir });
    const secret = `s3cret ${randomBytes(8).toString('hex')} 'quoted' $(not run)`;
    const command = shellJoin(['podman', 'run', '--rm', '-i', '--label', LABEL, IMAGE, 'node', '/app/digest-stdin.js']);
    expect(command).not.toContain(secret);
    const r = await execOk(conn, command, { stdin: secret, timeoutMs: 60_000 });
    expect(r.stdout.trim()).toBe(createHash('sha256').update(secret).digest('hex'));

    // A registry stand-in on loopback that accepts exactly alice + the secret (Basic auth).
    const expectedAuth = `Basic ${Buffer.from(`alice:${secret}`).toString('base64')}`;
    const seen: string[] = [];
    const { server, port } = await listen((req) => {
      seen.push(req.headers.authorization ?? '');
      const headers = { 'Docker-Distribution-API-Version': 'registry/2.0', 'WWW-Authenticate': 'Basic realm="test"' };
      return req.headers.authorization === expectedAuth
        ? { status: 200, headers, body: '{}' }
        : { status: 401, headers };
    });
    const authDir = mkdtempSync(path.join(tmpdir(), 'gantry-auth-'));
    try {
      const login = (password: string) =>
        exec(
          conn,
          shellJoin([
            'podman',
            'login',
            '--tls-verify=false',
            '--authfile',
            path.join(authDir, 'auth.json'),
            '-u',
            'alice',
            '--password-stdin',
            `127.0.0.1:${port}`,
          ]),
          {
            stdin: password,
            timeoutMs: 60_000,
          },
        );
      const ok = await login(secret);
      expect(ok.code, ok.stderr).toBe(0);
      expect(seen).toContain(expectedAuth);
      const bad = await login('wrong');
      expect(bad.code).not.toBe(0);
      expect(bad.stderr).toMatch(/invalid username\/password|unauthorized/i);
    } finally {
      server.close();
      rmSync(authDir, { recursive: true, force: true });
    }
  });

  it("streams a container's logs line by line and stops following when the reader stops", async () => {
    ensureTestWorkerImage(IMAGE, { appDir });
    const name = containerName();
    const program = "let i = 0; setInterval(() => { console.log('tick ' + i); console.error('tock ' + i); i++; }, 50)";
    await execOk(
      conn,
      shellJoin(['podman', 'run', '-d', '--name', name, '--label', LABEL, IMAGE, 'node', '-e', program]),
      { timeoutMs: 60_000 },
    );

    const stream = await execStream(conn, shellJoin(['podman', 'logs', '-f', name]));
    const got: OutputLine[] = [];
    for await (const line of stream.lines as AsyncIterable<OutputLine>) {
      got.push(line);
      if (got.filter((l) => l.stream === 'stdout').length >= 5 && got.some((l) => l.stream === 'stderr')) break;
    }
    expect(
      got
        .filter((l) => l.stream === 'stdout')
        .slice(0, 5)
        .map((l) => l.line),
    ).toEqual(['tick 0', 'tick 1', 'tick 2', 'tick 3', 'tick 4']);
    expect(got.find((l) => l.stream === 'stderr')?.line).toBe('tock 0');
    await stream.close();
    const exit = await stream.exit;
    expect(exit.lost).toBe(false);
    // The follower is gone from the host even though the container keeps logging.
    const left = await exec(conn, `pgrep -f '[p]odman logs -f ${name}' || true`);
    expect(left.stdout.trim()).toBe('');

    // A command that ends on its own ends the stream, with its exit status.
    const finite = await execStream(conn, 'printf "a\\nb\\r\\nc"; exit 4');
    const lines: string[] = [];
    for await (const l of finite.lines as AsyncIterable<OutputLine>) lines.push(l.line);
    expect(lines).toEqual(['a', 'b', 'c']);
    expect(await finite.exit).toEqual({ code: 4, lost: false });
  });

  it('pools connections per host, spreads channels, and reconnects after a drop', async () => {
    const pool = new SshPool({ maxConnectionsPerHost: 2, maxChannels: 4 });
    pools.push(pool);
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => pool.execOk(target, `sleep 0.2; echo ${i}`)),
    );
    expect(results.map((r) => r.stdout.trim())).toEqual(Array.from({ length: 12 }, (_, i) => String(i)));
    expect(pool.size()).toBeGreaterThanOrEqual(1);
    expect(pool.size()).toBeLessThanOrEqual(2);

    const first = await pool.get(target);
    expect(await pool.get(target)).toBe(first);
    first.client.destroy();
    await new Promise<void>((resolve) => first.onClose(resolve));
    expect((await pool.execOk(target, 'echo again')).stdout).toBe('again\n');
    expect(await pool.get(target)).not.toBe(first);

    await expect(
      pool.exec({ ...target, expectedHostKeySha256: 'SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }, 'true'),
    ).rejects.toBeInstanceOf(HostKeyMismatchError);
  });
});
