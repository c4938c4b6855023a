/**
 * `gantry init`: the project files from cli/templates, valid for the scanner, never overwriting
 * what exists without --force; and the command-line conventions (help, usage errors exit 2).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { gantry, repoRoot, runCommand, cliEnv, tempDir } from '../support/cli.ts';

const PROJECT_FILES = [
  'lb_worker.py',
  'gpu_worker.py',
  'cpu_worker.py',
  '.env.example',
  '.gantryignore',
  'gantry.toml',
  'requirements.txt',
  'README.md',
];

describe('gantry init', () => {
  const root = tempDir();
  const home = path.join(root, 'home');

  it('writes the project files into a new directory', async () => {
    const r = await gantry(['init', 'My Project'], { cwd: root, home });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const dir = path.join(root, 'My Project');
    for (const f of PROJECT_FILES) expect(existsSync(path.join(dir, f)), f).toBe(true);

    // The app name is the directory's, made fit for the platform.
    expect(readFileSync(path.join(dir, 'gantry.toml'), 'utf8')).toMatch(/^name = "my-project"$/m);
    const requirements = readFileSync(path.join(dir, 'requirements.txt'), 'utf8').split('\n');
    expect(requirements[0]).toBe(`gantry-sdk @ ${pathToFileURL(path.join(repoRoot, 'sdk', 'python')).href}`);
    expect(requirements[1]).toMatch(/^#/);
    const envExample = readFileSync(path.join(dir, '.env.example'), 'utf8');
    expect(envExample).toMatch(/^SERVICE_API_KEY=$/m);
    expect(envExample).toMatch(/^GANTRY_API_URL=$/m);
    const lb = readFileSync(path.join(dir, 'lb_worker.py'), 'utf8');
    expect(lb).toContain('@api.post("/process")');
    expect(lb).toContain('@api.get("/health")');
    expect(readFileSync(path.join(dir, 'cpu_worker.py'), 'utf8')).toContain('cpu="cpu3c-2-4"');
    expect(readFileSync(path.join(dir, 'README.md'), 'utf8')).toContain('gantry deploy');
  });

  it('makes a project the scanner reads without errors: three resources', async () => {
    const dir = path.join(root, 'scanned');
    expect((await gantry(['init', 'scanned'], { cwd: root, home })).code).toBe(0);
    const scan = await runCommand('python3', [path.join(repoRoot, 'sdk', 'python', 'gantry', 'scan.py'), dir], {
      cwd: root,
      env: cliEnv(home),
    });
    expect(scan.code).toBe(0);
    const answer = JSON.parse(scan.stdout) as {
      resources: Array<{ name: string; kind: string; routes?: Array<{ method: string; path: string }> }>;
      errors: unknown[];
    };
    expect(answer.errors).toEqual([]);
    expect(answer.resources.map((r) => [r.name, r.kind]).sort()).toEqual([
      ['cpu-worker', 'queue'],
      ['gpu-worker', 'queue'],
      ['lb-worker', 'lb'],
    ]);
    const lb = answer.resources.find((r) => r.kind === 'lb')!;
    expect(lb.routes!.map((r) => `${r.method} ${r.path}`)).toEqual(
      expect.arrayContaining(['POST /process', 'GET /health']),
    );
    expect(lb.routes!.length).toBeGreaterThanOrEqual(3);
  });

  it("'.' means the current directory", async () => {
    const dir = path.join(root, 'here_we_are');
    mkdirSync(dir);
    const r = await gantry(['init', '.'], { cwd: dir, home });
    expect(r.code).toBe(0);
    expect(readFileSync(path.join(dir, 'gantry.toml'), 'utf8')).toMatch(/^name = "here-we-are"$/m);
  });

  it('refuses to overwrite existing files, naming them all, and overwrites them with --force', async () => {
    const dir = path.join(root, 'taken');
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'README.md'), 'mine\n');
    writeFileSync(path.join(dir, 'cpu_worker.py'), '# mine\n');
    writeFileSync(path.join(dir, 'notes.txt'), 'untouched\n');

    const refused = await gantry(['init', 'taken'], { cwd: root, home });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('cpu_worker.py');
    expect(refused.stderr).toContain('README.md');
    expect(refused.stderr).toContain('--force');
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(readFileSync(path.join(dir, 'README.md'), 'utf8')).toBe('mine\n');
    expect(existsSync(path.join(dir, 'lb_worker.py'))).toBe(false);

    const forced = await gantry(['init', 'taken', '-f'], { cwd: root, home });
    expect(forced.code).toBe(0);
    expect(readFileSync(path.join(dir, 'README.md'), 'utf8')).toContain('gantry deploy');
    expect(readFileSync(path.join(dir, 'cpu_worker.py'), 'utf8')).toContain('@endpoint');
    expect(readFileSync(path.join(dir, 'notes.txt'), 'utf8')).toBe('untouched\n');
  });
});

describe('command-line conventions', () => {
  const root = tempDir();
  const home = path.join(root, 'home');

  it('--help on the program and on each command', async () => {
    const top = await gantry(['--help'], { cwd: root, home });
    expect(top.code).toBe(0);
    for (const command of ['init', 'build', 'deploy', 'undeploy', 'env', 'app', 'login', 'logout'])
      expect(top.stdout).toContain(command);
    const deploy = await gantry(['deploy', '--help'], { cwd: root, home });
    expect(deploy.code).toBe(0);
    for (const flag of ['--env', '--app', '--no-deps', '--exclude', '--output', '--python-version', '--json'])
      expect(deploy.stdout).toContain(flag);
    const envList = await gantry(['env', 'list', '--help'], { cwd: root, home });
    expect(envList.code).toBe(0);
    expect(envList.stdout).toContain('--app');
  });

  it("usage errors exit 2 with commander's message", async () => {
    const unknown = await gantry(['build', '--frobnicate'], { cwd: root, home });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown option '--frobnicate'");
    const missing = await gantry(['init'], { cwd: root, home });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('missing required argument');
    const choice = await gantry(['build', '--python-version', '3.9'], { cwd: root, home });
    expect(choice.code).toBe(2);
    expect(choice.stderr).toContain('3.10, 3.11, 3.12, 3.13');
    const command = await gantry(['deplyo'], { cwd: root, home });
    expect(command.code).toBe(2);
    expect(command.stderr).toContain('deploy');
  });

  it('deploy --preview says what is missing in a folder without resources', async () => {
    const r = await gantry(['deploy', '--preview'], { cwd: root, home });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/No resources found/);
  });
});
