/**
 * The CLI as users install it: `npm pack` of cli/ (its prepack compiles to dist/ and copies the
 * Python package in), installed with `npm install -g --prefix`, runs on its own: help, init and a
 * build, with none of the server's dependencies installed beside it.
 *
 * The pack runs on a copy of cli/ (with sdk/python and the repository's node_modules beside it,
 * as in the repository): packing in place would make a dist/ appear and disappear under the other
 * CLI tests, which run the source whenever there is no dist/.
 */
import { cpSync, existsSync, readdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliEnv, readManifest, repoRoot, runCommand, tempDir } from '../support/cli.ts';

/** npm on the node that runs the tests: the one `npm test` started (npm_execpath), else the one on PATH. */
function npm(args: string[], cwd: string, env: NodeJS.ProcessEnv): ReturnType<typeof runCommand> {
  const cli = process.env.npm_execpath;
  if (cli && /npm-cli\.js$/.test(cli))
    return runCommand(process.execPath, [cli, ...args], { cwd, env, timeoutMs: 300_000 });
  return runCommand('npm', args, { cwd, env, timeoutMs: 300_000 });
}

describe('the packed CLI', () => {
  const root = tempDir('gantry-pack-');

  it('installs alone with npm install -g and works', { timeout: 360_000 }, async () => {
    const work = path.join(root, 'repo');
    const skipBuilt = (p: string): boolean =>
      !/[/\\](node_modules|dist|python)([/\\]|$)|\.tgz$/.test(path.relative(repoRoot, p));
    cpSync(path.join(repoRoot, 'cli'), path.join(work, 'cli'), { recursive: true, filter: skipBuilt });
    cpSync(path.join(repoRoot, 'sdk', 'python'), path.join(work, 'sdk', 'python'), {
      recursive: true,
      filter: (p) => !p.includes('__pycache__'),
    });
    cpSync(path.join(repoRoot, 'tsconfig.json'), path.join(work, 'tsconfig.json'));
    // The packages the prepack's compile resolves (typescript, @types/node, the CLI's own), where the repository has them.
    symlinkSync(path.join(repoRoot, 'node_modules'), path.join(work, 'node_modules'), 'dir');
    symlinkSync(path.join(repoRoot, 'cli', 'node_modules'), path.join(work, 'cli', 'node_modules'), 'dir');

    const home = path.join(root, 'home');
    const env = cliEnv(home, {
      npm_config_cache: process.env.npm_config_cache ?? path.join(process.env.HOME ?? home, '.npm'),
      npm_config_update_notifier: 'false',
    });
    const packed = await npm(
      ['pack', '--pack-destination', root, '--no-fund', '--no-audit'],
      path.join(work, 'cli'),
      env,
    );
    expect(packed.code, packed.stderr).toBe(0);
    const tarball = readdirSync(root).find((f) => f.endsWith('.tgz'));
    expect(tarball).toBeDefined();
    // postpack cleaned up after itself.
    expect(existsSync(path.join(work, 'cli', 'dist'))).toBe(false);

    const prefix = path.join(root, 'prefix');
    const installed = await npm(
      ['install', '-g', '--prefix', prefix, '--no-fund', '--no-audit', '--prefer-offline', path.join(root, tarball!)],
      root,
      env,
    );
    expect(installed.code, installed.stderr).toBe(0);
    const pkg = path.join(prefix, 'lib', 'node_modules', '@gantry', 'cli');
    expect(existsSync(path.join(pkg, 'dist', 'index.js'))).toBe(true);
    expect(existsSync(path.join(pkg, 'python', 'gantry', 'scan.py'))).toBe(true);
    expect(existsSync(path.join(pkg, 'python', 'Containerfile'))).toBe(true);
    expect(existsSync(path.join(pkg, 'src'))).toBe(false);
    // Its own dependencies only (fastify serves `gantry dev`), none that only the server needs.
    const deps = readdirSync(path.join(pkg, 'node_modules'));
    for (const serverDep of ['@prisma', 'pg', '@temporalio', 'tsx', '@apollo', 'ssh2'])
      expect(deps).not.toContain(serverDep);

    // The bin link itself, found through PATH, on the node running these tests.
    const runEnv = {
      ...env,
      PATH: `${path.join(prefix, 'bin')}${path.delimiter}${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`,
    };
    const help = await runCommand('gantry', ['--help'], { cwd: root, env: runEnv });
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toContain('Usage: gantry');

    const init = await runCommand('gantry', ['init', 'proj'], { cwd: root, env: runEnv });
    expect(init.code, init.stderr).toBe(0);
    const build = await runCommand('gantry', ['build'], { cwd: path.join(root, 'proj'), env: runEnv });
    expect(build.code, build.stderr).toBe(0);
    const manifest = await readManifest(path.join(root, 'proj', 'artifact.tar.gz'));
    expect(manifest.resources).toHaveLength(3);
  });
});
