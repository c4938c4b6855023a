/**
 * A runtime's pip packages for a base without pip (Debian's Python made on the host,
 * hostctl/python-base.ts) on a host that may reach no package index: this machine's pip installs
 * them for the host's Python (wheels only, CPython X.Y on manylinux x86_64, as `gantry build` ships
 * an app's dependencies), and the host builds them onto the base as a layer of their own,
 * `localhost/gantry-python-packages:<python>-<digest>`. The runtime's own build then finds them
 * importable and installs nothing. The flash runtime's packages (runpod-flash, runpod) go this way.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { create } from 'tar';
import { buildImage, imagePresent, type HostHandle } from '../hostctl/containers.ts';
import type { SshPool } from '../hostctl/ssh.ts';

/** Bump when the steps below change in a way the hashed inputs do not show. */
const RECIPE = 1;
const PLATFORMS = ['manylinux2014_x86_64', 'manylinux_2_17_x86_64', 'manylinux_2_28_x86_64'];

/** The layer's Containerfile: the packages as a site directory (its .pth files are read), before the base's own. */
const CONTAINERFILE = `ARG BASE_IMAGE
FROM \${BASE_IMAGE}
COPY site /opt/gantry/site
RUN d=$(python3 -c 'import site; print(site.getsitepackages()[0])') && mkdir -p "$d" && \\
    echo 'import site; site.addsitedir("/opt/gantry/site")' > "$d/000-gantry-site.pth"
`;

const cacheRoot = (): string =>
  path.join(process.env.XDG_CACHE_HOME || path.join(homedir(), '.cache'), 'gantry', 'runtime-packages');

function run(cmd: string, args: string[]): Promise<{ code: number | null; output: string; missing: boolean }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', () => resolve({ code: null, output, missing: true }));
    child.once('close', (code) => resolve({ code, output, missing: false }));
  });
}

/** `python3` arguments: pip installs `requirements` into `target` for a host's CPython `python` on manylinux x86_64, wheels only. */
export function pipInstallForHost(target: string, python: string, requirements: readonly string[]): string[] {
  return [
    '-m',
    'pip',
    'install',
    '--quiet',
    '--disable-pip-version-check',
    '--no-input',
    '--target',
    target,
    '--python-version',
    python,
    '--implementation',
    'cp',
    ...PLATFORMS.flatMap((p) => ['--platform', p]),
    '--only-binary=:all:',
    ...requirements,
  ];
}

/** One install per digest in this process; the directory appears whole (a rename) for the others. */
const installs = new Map<string, Promise<string | undefined>>();

/**
 * A directory holding `site/` with the packages installed for `python`, and the layer's
 * Containerfile; undefined when this machine has no Python with pip to install them.
 */
function installHere(python: string, packages: readonly string[], digest: string): Promise<string | undefined> {
  let install = installs.get(digest);
  if (!install) {
    install = (async () => {
      const dir = path.join(cacheRoot(), digest);
      if (existsSync(path.join(dir, 'Containerfile'))) return dir;
      mkdirSync(cacheRoot(), { recursive: true });
      const work = mkdtempSync(path.join(cacheRoot(), `.${digest}-`));
      try {
        const pip = await run('python3', pipInstallForHost(path.join(work, 'site'), python, packages));
        if (pip.missing || /No module named pip/.test(pip.output)) return undefined;
        if (pip.code !== 0)
          throw new Error(
            `pip here could not install ${packages.join(' ')} for Python ${python}: ${pip.output.trim().split('\n').slice(-8).join('\n')}`,
          );
        writeFileSync(path.join(work, 'Containerfile'), CONTAINERFILE);
        try {
          renameSync(work, dir);
        } catch {
          // Another process finished first: its directory is as good as ours.
        }
        return dir;
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    })();
    installs.set(digest, install);
    install.catch(() => installs.delete(digest));
  }
  return install;
}

/**
 * `base` with `packages` added as a layer, built on the host when missing; undefined when this
 * machine has no pip to install them (the runtime's build then tries the base's own pip).
 */
export async function packagesLayer(
  pool: SshPool,
  h: HostHandle,
  base: string,
  python: string,
  packages: readonly string[],
  options: { timeoutMs: number; signal?: AbortSignal },
): Promise<string | undefined> {
  const digest = createHash('sha256')
    .update(JSON.stringify({ RECIPE, base, python, packages: [...packages].sort(), PLATFORMS, CONTAINERFILE }))
    .digest('hex')
    .slice(0, 12);
  const name = `localhost/gantry-python-packages:${python}-${digest}`;
  if (await imagePresent(pool, h, name)) return name;
  const dir = await installHere(python, packages, digest);
  if (!dir) return undefined;
  const chunks: Buffer[] = [];
  for await (const chunk of create({ cwd: dir, portable: true }, ['Containerfile', 'site']))
    chunks.push(chunk as Buffer);
  await buildImage(pool, h, name, Buffer.concat(chunks), { BASE_IMAGE: base }, options);
  return name;
}
