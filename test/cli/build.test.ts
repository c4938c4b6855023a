/**
 * `gantry build` on real projects (made by `gantry init`), with the real scanner and real pip
 * against PyPI: the artifact's layout and manifest (docs/apps.md), its determinism, dependencies,
 * exclusions, the size limit, scanner errors, and `.env` staying out.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { PrepareUploadSchema } from '../../domain/apps/index.ts';
import { validate } from '../../domain/shared/index.ts';
import { gantry, readArtifact, readManifest, tempDir } from '../support/cli.ts';

const localPython = execFileSync('python3', ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])'], {
  encoding: 'utf8',
}).trim();

describe('gantry build', () => {
  const root = tempDir();
  const home = `${root}/home`;

  /** A fresh `gantry init` project. */
  async function project(name: string): Promise<string> {
    const r = await gantry(['init', name], { cwd: root, home });
    expect(r.code, r.stderr).toBe(0);
    return path.join(root, name);
  }

  describe('the init project', () => {
    let dir: string;
    beforeAll(async () => {
      dir = await project('basic');
    });

    it('writes manifest.json, src/ and deps/ as docs/apps.md says', async () => {
      const r = await gantry(['build', '--json'], { cwd: dir, home });
      expect(r.code, r.stderr).toBe(0);
      const result = JSON.parse(r.stdout) as {
        path: string;
        size: number;
        sha256: string;
        fingerprint: string;
        pythonVersion: string;
      };
      expect(result.path).toBe(path.join(dir, 'artifact.tar.gz'));
      expect(result.sha256).toMatch(/^[0-9a-f]{64}$/);

      const { entries } = await readArtifact(result.path, () => false);
      expect(entries).toContain('manifest.json');
      for (const f of [
        'lb_worker.py',
        'gpu_worker.py',
        'cpu_worker.py',
        'gantry.toml',
        'requirements.txt',
        'README.md',
      ])
        expect(entries).toContain(`src/${f}`);
      expect(entries).toContain('deps/gantry/__init__.py');
      expect(entries).toContain('deps/gantry/scan.py');
      expect(entries.some((e) => e.includes('__pycache__'))).toBe(false);
      // Sorted, so the same tree always gives the same bytes.
      const paths = entries.map((e) => e.replace(/\/$/, ''));
      expect(paths).toEqual([...paths].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))));

      const manifest = await readManifest(result.path);
      expect(manifest.format).toBe(1);
      expect(manifest.pythonVersion).toBe(localPython);
      expect(manifest.fingerprint).toBe(result.fingerprint);
      expect(manifest.fingerprint).toMatch(/^[0-9a-f]{64}$/);
      // CPU resources beside the GPU one: nothing is left out as being in the (GPU) runtime image.
      expect(manifest.excluded).toEqual([]);
      expect(Number.isNaN(Date.parse(String(manifest.createdAt)))).toBe(false);
      const byName = Object.fromEntries(manifest.resources.map((r) => [r.name, r]));
      expect(Object.keys(byName).sort()).toEqual(['cpu-worker', 'gpu-worker', 'lb-worker']);
      expect(byName['lb-worker']).toMatchObject({ kind: 'lb', file: 'lb_worker.py', object: 'api' });
      const routes = (byName['lb-worker']!.routes as Array<{ method: string; path: string }>).map(
        (r) => `${r.method} ${r.path}`,
      );
      expect(routes).toEqual(expect.arrayContaining(['POST /process', 'GET /health']));
      expect(byName['gpu-worker']).toMatchObject({
        kind: 'queue',
        function: 'generate',
        compute: { gpu: { pools: ['ADA_24'], count: 1 } },
      });
      expect(byName['cpu-worker']).toMatchObject({ kind: 'queue', function: 'add', compute: { cpu: 'cpu3c-2-4' } });
    });

    it("is what the platform's prepareArtifactUpload accepts", async () => {
      // The body `gantry deploy` sends (POST /v2/apps/{app}/builds), checked with the platform's own schema.
      const file = path.join(dir, 'artifact.tar.gz');
      const r = await gantry(['build', '--json'], { cwd: dir, home });
      expect(r.code, r.stderr).toBe(0);
      const { sha256, size } = JSON.parse(r.stdout) as { sha256: string; size: number };
      const manifest = await readManifest(file);
      expect(() => validate(PrepareUploadSchema, { sha256, size, manifest })).not.toThrow();
    });

    it('gives the same fingerprint and the same sha256 when built again', async () => {
      const first = await gantry(['build', '--json', '-o', path.join(root, 'one.tar.gz')], { cwd: dir, home });
      const second = await gantry(['build', '--json', '-o', 'two.tar.gz'], { cwd: dir, home });
      expect(first.code, first.stderr).toBe(0);
      expect(second.code, second.stderr).toBe(0);
      const a = JSON.parse(first.stdout) as { sha256: string; fingerprint: string };
      const b = JSON.parse(second.stdout) as { sha256: string; fingerprint: string };
      expect(b.fingerprint).toBe(a.fingerprint);
      expect(b.sha256).toBe(a.sha256);
      // The artifact being written is never part of its own source.
      const { entries } = await readArtifact(path.join(dir, 'two.tar.gz'), () => false);
      expect(entries).not.toContain('src/two.tar.gz');
    });

    it('changes the fingerprint when a source file changes', async () => {
      const before = JSON.parse(
        (await gantry(['build', '--json', '-o', path.join(root, 'fp1.tar.gz')], { cwd: dir, home })).stdout,
      ) as { fingerprint: string };
      writeFileSync(path.join(dir, 'extra.py'), 'X = 1\n');
      const after = JSON.parse(
        (await gantry(['build', '--json', '-o', path.join(root, 'fp2.tar.gz')], { cwd: dir, home })).stdout,
      ) as { fingerprint: string };
      expect(after.fingerprint).not.toBe(before.fingerprint);
    });

    it('takes --python-version, else gantry.toml python_version', async () => {
      const flagged = await gantry(['build', '--python-version', '3.13', '-o', path.join(root, 'py313.tar.gz')], {
        cwd: dir,
        home,
      });
      expect(flagged.code, flagged.stderr).toBe(0);
      expect((await readManifest(path.join(root, 'py313.tar.gz'))).pythonVersion).toBe('3.13');

      const toml = readFileSync(path.join(dir, 'gantry.toml'), 'utf8');
      writeFileSync(
        path.join(dir, 'gantry.toml'),
        toml.replace('# python_version = "3.11"', 'python_version = "3.12"'),
      );
      const configured = await gantry(['build', '-o', path.join(root, 'py312.tar.gz')], { cwd: dir, home });
      writeFileSync(path.join(dir, 'gantry.toml'), toml);
      expect(configured.code, configured.stderr).toBe(0);
      expect((await readManifest(path.join(root, 'py312.tar.gz'))).pythonVersion).toBe('3.12');
    });
  });

  it('installs requirements.txt into deps/ (without the gantry-sdk line)', async () => {
    const dir = await project('with-six');
    writeFileSync(
      path.join(dir, 'requirements.txt'),
      `${readFileSync(path.join(dir, 'requirements.txt'), 'utf8')}six==1.17.0\n`,
    );
    const r = await gantry(['build'], { cwd: dir, home });
    expect(r.code, r.stderr).toBe(0);
    const { entries } = await readArtifact(path.join(dir, 'artifact.tar.gz'), () => false);
    expect(entries).toContain('deps/six.py');
    expect(entries).toContain('deps/six-1.17.0.dist-info/METADATA');
    expect(entries.some((e) => /gantry_sdk/.test(e))).toBe(false);
  });

  describe("a resource's dependencies, with and without their own", () => {
    let dir: string;
    beforeAll(async () => {
      dir = await project('with-dateutil');
      // python-dateutil needs six: what pip brings along, --no-deps leaves out and --exclude takes out.
      const worker = readFileSync(path.join(dir, 'cpu_worker.py'), 'utf8');
      writeFileSync(
        path.join(dir, 'cpu_worker.py'),
        worker.replace('workers=(0, 3))', 'workers=(0, 3), dependencies=["python-dateutil==2.9.0.post0"])'),
      );
    });

    it('installs what the dependencies need', async () => {
      const r = await gantry(['build', '-o', 'full.tar.gz'], { cwd: dir, home });
      expect(r.code, r.stderr).toBe(0);
      const { entries } = await readArtifact(path.join(dir, 'full.tar.gz'), () => false);
      expect(entries).toContain('deps/dateutil/__init__.py');
      expect(entries).toContain('deps/six.py');
    });

    it('--no-deps installs only what is listed', async () => {
      const r = await gantry(['build', '--no-deps', '-o', 'nodeps.tar.gz'], { cwd: dir, home });
      expect(r.code, r.stderr).toBe(0);
      const { entries } = await readArtifact(path.join(dir, 'nodeps.tar.gz'), () => false);
      expect(entries).toContain('deps/dateutil/__init__.py');
      expect(entries).not.toContain('deps/six.py');
    });

    it('--exclude removes a package pip installed, and the manifest records it', async () => {
      const r = await gantry(['build', '--exclude', 'Six, other_pkg', '-o', 'excluded.tar.gz'], { cwd: dir, home });
      expect(r.code, r.stderr).toBe(0);
      const { entries } = await readArtifact(path.join(dir, 'excluded.tar.gz'), () => false);
      expect(entries).toContain('deps/dateutil/__init__.py');
      expect(entries.filter((e) => /^deps\/six[.-]/.test(e))).toEqual([]);
      const manifest = await readManifest(path.join(dir, 'excluded.tar.gz'));
      expect(manifest.excluded).toEqual(['six', 'other-pkg']);
    });

    it('over the size limit, names the largest packages and suggests --exclude', async () => {
      const r = await gantry(['build', '-o', 'toobig.tar.gz'], {
        cwd: dir,
        home,
        env: { GANTRY_MAX_ARTIFACT_BYTES: '50000' },
      });
      expect(r.code).toBe(1);
      const message = r.stderr.trim().split('\n').at(-1)!;
      expect(message).toMatch(/over the 50\.0 kB limit/);
      expect(message).toMatch(/python-dateutil \([\d.]+ kB\)/);
      expect(message).toMatch(/six \([\d.]+ kB\)/);
      expect(message).toContain('--exclude');
      expect(existsSync(path.join(dir, 'toobig.tar.gz'))).toBe(false);
    });
  });

  describe('packages of the runtime images (torch, numpy, ...)', () => {
    it('leaves them out of a project whose resources all run on the GPU image', async () => {
      const dir = await project('gpu-only');
      for (const f of ['cpu_worker.py', 'lb_worker.py']) execFileSync('rm', [path.join(dir, f)]);
      const gpu = readFileSync(path.join(dir, 'gpu_worker.py'), 'utf8');
      writeFileSync(
        path.join(dir, 'gpu_worker.py'),
        gpu.replace('from gantry import endpoint', 'import torch\nfrom gantry import endpoint'),
      );
      const r = await gantry(['build', '-o', 'gpu.tar.gz'], { cwd: dir, home });
      expect(r.code, r.stderr).toBe(0);
      expect((await readManifest(path.join(dir, 'gpu.tar.gz'))).excluded).toEqual([
        'torch',
        'torchvision',
        'torchaudio',
        'numpy',
        'triton',
      ]);
    });

    it('refuses a CPU resource that imports one without listing it, naming the package and the image', async () => {
      const dir = await project('cpu-numpy');
      const cpu = readFileSync(path.join(dir, 'cpu_worker.py'), 'utf8');
      writeFileSync(path.join(dir, 'cpu_worker.py'), `import numpy.linalg\n${cpu}`);
      const r = await gantry(['build', '-o', 'cpu.tar.gz'], { cwd: dir, home });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(
        'cpu-worker (cpu_worker.py) imports numpy, which its runtime image does not have: CPU resources run on Python with the gantry package alone',
      );
      expect(r.stderr).toContain('List numpy in requirements.txt to ship it in the artifact');
      expect(existsSync(path.join(dir, 'cpu.tar.gz'))).toBe(false);
    });
  });

  it('a file that does not parse: one message naming file and line, exit 1', async () => {
    const dir = await project('broken');
    writeFileSync(path.join(dir, 'broken_worker.py'), 'from gantry import endpoint\n\ndef oops(:\n    pass\n');
    const r = await gantry(['build'], { cwd: dir, home });
    expect(r.code).toBe(1);
    const errors = r.stderr.split('\n').filter((l) => l.startsWith('error:'));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^error: broken_worker\.py:3: /);
    expect(existsSync(path.join(dir, 'artifact.tar.gz'))).toBe(false);
  });

  it('never puts .env into the artifact, whatever the ignore file says', async () => {
    const dir = await project('secret');
    const secret = 'sk-never-ship-this-0123456789';
    writeFileSync(path.join(dir, '.env'), `SERVICE_API_KEY=${secret}\n`);
    writeFileSync(path.join(dir, '.gantryignore'), '!.env\n!**/.env\n');
    const r = await gantry(['build'], { cwd: dir, home });
    expect(r.code, r.stderr).toBe(0);
    const { entries, files } = await readArtifact(path.join(dir, 'artifact.tar.gz'));
    expect(entries.filter((e) => path.posix.basename(e) === '.env')).toEqual([]);
    for (const [name, content] of files) expect(content.includes(secret), name).toBe(false);
  });
});
