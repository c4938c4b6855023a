import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseToml, TomlError } from 'smol-toml';
import { CliError } from './errors.ts';

export const PROJECT_FILE = 'gantry.toml';
export const PYTHON_VERSIONS = ['3.10', '3.11', '3.12', '3.13'] as const;
export type PythonVersion = (typeof PYTHON_VERSIONS)[number];

export const isPythonVersion = (v: unknown): v is PythonVersion => (PYTHON_VERSIONS as readonly unknown[]).includes(v);

/** `gantry.toml`: `[project] name = "..."`, `python_version = "3.11"` (optional). */
export interface ProjectConfig {
  name?: string;
  pythonVersion?: PythonVersion;
}

export function readProjectConfig(projectDir: string): ProjectConfig {
  const file = path.join(projectDir, PROJECT_FILE);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return {};
  }
  let data: Record<string, unknown>;
  try {
    data = parseToml(text) as Record<string, unknown>;
  } catch (err) {
    const where = err instanceof TomlError ? `${PROJECT_FILE}:${err.line}` : PROJECT_FILE;
    const why = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new CliError(`${where}: ${why}`);
  }
  const project = data.project;
  if (project === undefined) return {};
  if (typeof project !== 'object' || project === null || Array.isArray(project)) {
    throw new CliError(`${PROJECT_FILE}: [project] must be a table.`);
  }
  const { name, python_version: pythonVersion } = project as Record<string, unknown>;
  if (name !== undefined && (typeof name !== 'string' || normaliseName(name) === '')) {
    throw new CliError(`${PROJECT_FILE}: project.name must be a string with letters or digits.`);
  }
  if (pythonVersion !== undefined && !isPythonVersion(pythonVersion)) {
    throw new CliError(
      `${PROJECT_FILE}: project.python_version must be one of ${PYTHON_VERSIONS.join(', ')} (a string), not ${JSON.stringify(pythonVersion)}.`,
    );
  }
  return { ...(name !== undefined ? { name } : {}), ...(pythonVersion !== undefined ? { pythonVersion } : {}) };
}

/**
 * App and environment names on the platform: `[a-z0-9][a-z0-9-]{0,39}`. Anything else becomes that
 * shape: lower case, every run of other characters one `-`, no `-` at either end, 40 at most.
 */
export function normaliseName(raw: string): string {
  return raw
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+/, '')
    .slice(0, 40)
    .replace(/-+$/, '');
}

export const NAME_RULE = '1-40 lower-case letters, digits and -, starting with a letter or digit';
export const isPlatformName = (name: string): boolean => /^[a-z0-9][a-z0-9-]{0,39}$/.test(name);

/** Deploy's app name: --app, else gantry.toml's project name, else the directory's name; normalised. */
export function resolveAppName(projectDir: string, flag: string | undefined): string {
  const raw = flag ?? readProjectConfig(projectDir).name ?? path.basename(path.resolve(projectDir));
  const name = normaliseName(raw);
  if (!name) throw new CliError(`Cannot make an app name out of '${raw}'; pass --app NAME (${NAME_RULE}).`);
  return name;
}

/** An environment name given on the command line, checked rather than silently changed. */
export function checkEnvironmentName(name: string): string {
  if (!isPlatformName(name)) throw new CliError(`'${name}' is not a valid environment name (${NAME_RULE}).`);
  return name;
}
