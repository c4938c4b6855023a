/**
 * Runs the real `gantry` CLI (cli/bin/gantry.mjs, the TypeScript source through tsx) as a child
 * process in a temporary directory, with a home of its own, so no test reads the machine's login
 * or the developer's SERVICE_API_KEY.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { list } from 'tar';
import { afterAll } from 'vitest';

export const repoRoot = path.resolve(import.meta.dirname, '../..');
export const gantryBin = path.join(repoRoot, 'cli', 'bin', 'gantry.mjs');

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** A temporary directory removed after the file's tests. */
export function tempDir(prefix = 'gantry-cli-'): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The environment a CLI run sees: this one, less anything that would leak the machine's settings into it. */
export function cliEnv(home: string, extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, XDG_CONFIG_HOME: path.join(home, '.config') };
  for (const name of [
    'SERVICE_API_KEY',
    'GANTRY_API_URL',
    'GANTRY_PYTHON',
    'GANTRY_MAX_ARTIFACT_BYTES',
    'SOURCE_DATE_EPOCH',
  ])
    delete env[name];
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

export function runCommand(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 120_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr });
    });
  });
}

/** `gantry ARGS` in cwd; `home` is where the config folder lives (default: a folder inside cwd's parent temp dir). */
export function gantry(
  args: string[],
  options: { cwd: string; home: string; env?: Record<string, string | undefined>; timeoutMs?: number },
): Promise<Run> {
  mkdirSync(options.home, { recursive: true });
  return runCommand(process.execPath, [gantryBin, ...args], {
    cwd: options.cwd,
    env: cliEnv(options.home, options.env),
    timeoutMs: options.timeoutMs,
  });
}

/** Paths and contents of the files in a tar.gz (contents for the paths `want` keeps). */
export async function readArtifact(
  file: string,
  want: (p: string) => boolean = () => true,
): Promise<{ entries: string[]; files: Map<string, Buffer> }> {
  const entries: string[] = [];
  const files = new Map<string, Buffer>();
  const pending: Array<Promise<void>> = [];
  await list({
    file,
    onReadEntry: (entry) => {
      entries.push(entry.path);
      if (entry.type === 'File' && want(entry.path)) {
        const chunks: Buffer[] = [];
        entry.on('data', (c: Buffer) => chunks.push(c));
        pending.push(
          new Promise<void>((resolve) =>
            entry.on('end', () => {
              files.set(entry.path, Buffer.concat(chunks));
              resolve();
            }),
          ),
        );
      } else entry.resume();
    },
  });
  await Promise.all(pending);
  return { entries, files };
}

export async function readManifest(
  file: string,
): Promise<Record<string, unknown> & { resources: Array<Record<string, unknown>> }> {
  const { files } = await readArtifact(file, (p) => p === 'manifest.json');
  const manifest = files.get('manifest.json');
  if (!manifest) throw new Error(`${file} has no manifest.json`);
  return JSON.parse(manifest.toString('utf8')) as Record<string, unknown> & {
    resources: Array<Record<string, unknown>>;
  };
}

/**
 * Runs the CLI in a terminal of its own (util-linux `script` gives it a pty), typing `keys` once
 * the output matches `when`: how a person answers a prompt. Answers the exit code and everything
 * the terminal showed.
 */
export function gantryInTerminal(
  args: string[],
  options: { cwd: string; home: string; env?: Record<string, string | undefined>; when: RegExp; keys: string },
  timeoutMs = 300_000,
): Promise<{ code: number | null; output: string }> {
  const command = [process.execPath, gantryBin, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
  // A new pty has no size (0 columns), which prompts wrap at every character: give it one.
  const child = spawn('script', ['-qec', `stty cols 120 rows 40; exec ${command}`, '/dev/null'], {
    cwd: options.cwd,
    env: cliEnv(options.home, options.env),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  let typed = false;
  const read = (d: Buffer): void => {
    output += d.toString();
    if (!typed && options.when.test(output)) {
      typed = true;
      child.stdin.write(options.keys);
    }
  };
  child.stdout.on('data', read);
  child.stderr.on('data', read);
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}
