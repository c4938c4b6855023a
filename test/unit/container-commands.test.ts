/**
 * Finding 10: every container runtime command ends its options with `--` before an operand, so an
 * image or a name that looks like an option stays an operand. The command lines are checked as
 * emitted, and run for real against the Podman (and, without an engine, the Docker CLI) here.
 * Finding 2 (pull side): a credential is never sent to a registry it is not bound to.
 */
import { spawn, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import {
  ensureImage,
  inspectContainer,
  logsCommand,
  runArgs,
  type ContainerSpec,
  type HostHandle,
  type RuntimeName,
} from '../../hostctl/containers.ts';
import type { ExecResult, SshPool } from '../../hostctl/ssh.ts';
import { prepareTestHostMachine } from '../support/ssh-test-host.ts';

/** Runs each command with this machine's shell (what the SSH host would do), recording it. */
class LocalShell {
  readonly commands: string[] = [];
  async exec(_target: unknown, command: string, options: { stdin?: string } = {}): Promise<ExecResult> {
    this.commands.push(command);
    return new Promise((resolve) => {
      const child = spawn('sh', ['-c', command], { stdio: ['pipe', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (code) => resolve({ code, stdout, stderr, truncated: false }));
      child.stdin.end(options.stdin ?? '');
    });
  }
}

const handle = (runtime: RuntimeName): HostHandle => ({
  hostId: 'h1',
  runtime,
  target: { host: '127.0.0.1', port: 22, user: 'root', privateKey: '' },
});
const has = (bin: string): boolean => spawnSync(bin, ['--version'], { encoding: 'utf8' }).status === 0;

// Podman is part of the suite's machine (installed here when missing, as the SSH host tests do), so
// its checks always run; the Docker CLI is checked where the machine has one.
prepareTestHostMachine(() => {});

const spec: ContainerSpec = {
  name: 'gantry-w1',
  image: 'ghcr.io/team/app:1',
  args: ['--privileged', '-v', '/:/host'],
  env: { A: 'b' },
  labels: { 'gantry.worker': 'w1' },
  network: 'gantry-h1-a1',
  publishAddress: '10.0.0.5',
  publish: ['8000/tcp'],
  publishFixed: [],
  gpuUuids: [],
  gpuMethod: 'none',
  diskGb: undefined,
};

describe('container runtime command lines', () => {
  it('run: options end with -- right before the image; what follows the image is the container command', () => {
    const args = runArgs(spec, '/tmp/env');
    const sep = args.indexOf('--');
    expect(sep).toBeGreaterThan(0);
    expect(args.slice(sep)).toEqual(['--', 'ghcr.io/team/app:1', '--privileged', '-v', '/:/host']);
    expect(args.filter((a) => a === '--')).toHaveLength(1);
  });

  it('logs: the container name follows --', () => {
    expect(logsCommand('podman', '--all', { follow: true, tail: 10 })).toBe(
      'podman logs --timestamps --follow --tail 10 -- --all',
    );
    expect(logsCommand('docker', 'gantry-w1', { follow: false })).toMatch(/ -- gantry-w1$/);
  });

  for (const runtime of ['podman', 'docker'] as const) {
    it.skipIf(!has(runtime))(
      `${runtime}: an option-shaped image is pulled as a (bad) reference, never read as an option`,
      async () => {
        const shell = new LocalShell();
        // Without `--`, podman would answer "unknown flag: --version"; docker the same.
        await expect(
          ensureImage(shell as unknown as SshPool, handle(runtime), '--version', undefined, { timeoutMs: 30_000 }),
        ).rejects.toThrow(/invalid reference format/);
        expect(shell.commands.at(-1)).toBe(`${runtime} pull --quiet -- --version`);
        expect(shell.commands[0]).toContain(' -- --version');
      },
    );
  }

  it('podman: an option-shaped container name is looked up as a name', async () => {
    const shell = new LocalShell();
    expect(await inspectContainer(shell as unknown as SshPool, handle('podman'), '--help')).toBeNull();
    expect(shell.commands[0]).toMatch(/ -- '?--help'?$/);
  });
});

describe('registry login at pull', () => {
  const login = (registry: string | null) => ({ username: 'bot', password: 'pw-never-on-a-command-line', registry });

  it('refuses a credential bound to another registry, or to none, before any command runs', async () => {
    for (const [image, registry] of [
      ['attacker.example/app:1', 'ghcr.io'],
      ['team/app:1', 'ghcr.io'],
      ['ghcr.io/team/app:1', null],
    ] as const) {
      const shell = new LocalShell();
      await expect(
        ensureImage(shell as unknown as SshPool, handle('podman'), image, login(registry), { timeoutMs: 30_000 }),
      ).rejects.toThrow(/registry credential is (bound to ghcr.io|not bound)/);
      // Only the local presence check ran: no login, no pull.
      expect(shell.commands.join('\n')).not.toMatch(/login|pull/);
    }
  });

  it('logs in to the bound registry only, the server after --, the password over stdin', async () => {
    const shell = new LocalShell();
    await expect(
      ensureImage(shell as unknown as SshPool, handle('podman'), '127.0.0.1:9/team/app:1', login('127.0.0.1:9'), {
        timeoutMs: 30_000,
      }),
    ).rejects.toThrow(/127\.0\.0\.1:9/);
    const script = shell.commands.at(-1)!;
    expect(script).toContain('podman login --authfile "$f" --username bot --password-stdin -- 127.0.0.1:9');
    expect(script).toContain('podman pull --quiet --authfile "$f" -- 127.0.0.1:9/team/app:1');
    expect(script).not.toContain('pw-never-on-a-command-line');
  });
});
