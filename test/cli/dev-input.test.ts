/**
 * `gantry dev` refusing to start, before it talks to any platform: no key, a broken file, a bad
 * port. (The running server, on a real platform, is test/cli/dev.test.ts.)
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { gantry, tempDir } from '../support/cli.ts';

describe('gantry dev: bad input', () => {
  const root = tempDir('gantry-dev-input-');
  const home = path.join(root, 'home');
  const project = path.join(root, 'proj');
  mkdirSync(project, { recursive: true });
  writeFileSync(
    path.join(project, 'worker.py'),
    'from gantry import endpoint\n\n@endpoint(name="adder", cpu="cpu3c-2-4")\ndef add(a: int, b: int) -> dict:\n    """Adds."""\n    return {"sum": a + b}\n',
  );
  // Nothing listens here: a run that got past its checks would fail on the platform instead.
  const env = { GANTRY_API_URL: 'http://127.0.0.1:9' };

  it('without a key, stops with one sentence saying how to set it', async () => {
    for (const command of ['dev', 'run']) {
      const r = await gantry([command], { cwd: project, home, env });
      expect(r.code).toBe(1);
      const lines = r.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^error: No API key: set SERVICE_API_KEY .*\.env.*gantry login/);
      expect(r.stdout).toBe('');
    }
  });

  it('names file:line of a broken file at start', async () => {
    const dir = path.join(root, 'broken');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      path.join(dir, 'ok.py'),
      'from gantry import endpoint\n\n@endpoint(name="ok")\ndef ok() -> dict:\n    return {}\n',
    );
    writeFileSync(path.join(dir, 'broken.py'), 'from gantry import endpoint\n\ndef oops(:\n    pass\n');
    const r = await gantry(['dev'], { cwd: dir, home, env: { ...env, SERVICE_API_KEY: 'gntr_test' } });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(/^error: broken\.py:3: /);
  });

  it('refuses a port that is not one (a usage error)', async () => {
    const r = await gantry(['dev', '--port', 'http'], {
      cwd: project,
      home,
      env: { ...env, SERVICE_API_KEY: 'gntr_test' },
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/port/);
  });

  it('is listed in --help as dev; run is a hidden alias', async () => {
    const r = await gantry(['--help'], { cwd: project, home });
    expect(r.stdout).toMatch(/^\s+dev \[options\]/m);
    expect(r.stdout).not.toMatch(/^\s+run\b/m);
    const alias = await gantry(['run', '--help'], { cwd: project, home });
    expect(alias.code).toBe(0);
    expect(alias.stdout).toMatch(/--auto-provision/);
  });
});
