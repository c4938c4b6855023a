import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CliError } from './errors.ts';

/** The cli package's folder (src/ or dist/ is one level down). */
export const CLI_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The folder that holds the `gantry` Python package (and its pyproject.toml, so pip can install
 * it): the repository's `sdk/python` when the CLI runs from the repository, else the copy that
 * `npm pack` put into the package (`python/`).
 */
export function sdkRoot(): string {
  const inRepo = path.resolve(CLI_ROOT, '..', 'sdk', 'python');
  if (existsSync(path.join(inRepo, 'gantry'))) return inRepo;
  const packed = path.join(CLI_ROOT, 'python');
  if (existsSync(path.join(packed, 'gantry'))) return packed;
  throw new CliError(
    `The gantry Python package is missing from this installation (looked in ${inRepo} and ${packed}); reinstall the CLI.`,
  );
}

export const scannerPath = (): string => path.join(sdkRoot(), 'gantry', 'scan.py');

/** The project's interpreter: $GANTRY_PYTHON, else the project's `.venv`, else `python3`. */
export function projectPython(projectDir: string): string {
  if (process.env.GANTRY_PYTHON) return process.env.GANTRY_PYTHON;
  const venv = path.join(projectDir, '.venv', 'bin', 'python');
  if (existsSync(venv)) return venv;
  return 'python3';
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program to completion, collecting its output; a missing program is a CliError naming it. */
export function runProgram(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; onLine?: (line: string) => void } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let pending = '';
    const lines = (chunk: Buffer): void => {
      if (!options.onLine) return;
      pending += chunk.toString('utf8');
      const parts = pending.split('\n');
      pending = parts.pop() ?? '';
      for (const p of parts) if (p.trim()) options.onLine(p.trim());
    };
    child.stdout.on('data', (c: Buffer) => {
      out.push(c);
      lines(c);
    });
    child.stderr.on('data', (c: Buffer) => {
      err.push(c);
      lines(c);
    });
    child.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') {
        reject(
          new CliError(
            `Cannot run ${command}: it was not found. Install Python 3.10 or newer, or point GANTRY_PYTHON at an interpreter.`,
          ),
        );
      } else reject(new CliError(`Cannot run ${command}: ${e.message}.`));
    });
    child.on('close', (code, signal) => {
      resolve({
        code: code ?? (signal ? 128 : 1),
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      });
    });
  });
}

/** The last line of a program's error output that says something, for a one-line message. */
export function lastMeaningfulLine(text: string): string {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const errorLine = [...lines].reverse().find((l) => /^(ERROR|error|\w*Error)\b/.test(l));
  return errorLine ?? lines.at(-1) ?? '(no output)';
}

/** `major.minor` of an interpreter. */
export async function interpreterVersion(python: string): Promise<string> {
  const r = await runProgram(python, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])']);
  if (r.code !== 0) throw new CliError(`Cannot ask ${python} for its version: ${lastMeaningfulLine(r.stderr)}.`);
  return r.stdout.trim();
}
