import { CliError } from './errors.ts';
import { lastMeaningfulLine, runProgram, scannerPath } from './python.ts';

/** One resource as the scanner reports it (docs/apps.md); carried into the manifest unchanged. */
export interface Resource {
  name: string;
  kind: 'queue' | 'lb';
  file: string;
  line: number;
  function?: string;
  object?: string;
  summary?: string | null;
  params?: Array<{ name: string; annotation: string | null; required: boolean; default?: unknown }>;
  routes?: Array<{ method: string; path: string; function: string; summary?: string | null }>;
  compute: { gpu: { pools: string[]; count: number } } | { cpu: string };
  workers: { min: number; max: number };
  idleTimeout: number;
  scaler: { type: string; value: number };
  timeout: number;
  env: Record<string, string>;
  dependencies: string[];
  pythonVersion?: string | null;
  /** Runtime image packages (torch, numpy, ...) the resource's file imports: set by the build. */
  preinstalledImports?: string[];
}

export interface ScanError {
  file: string;
  line: number;
  message: string;
}

async function runScanner(python: string, args: string[]): Promise<unknown> {
  const r = await runProgram(python, [scannerPath(), ...args]);
  if (r.code !== 0)
    throw new CliError(`The scanner failed (${python}, exit ${r.code}): ${lastMeaningfulLine(r.stderr)}.`);
  try {
    return JSON.parse(r.stdout);
  } catch {
    throw new CliError(`The scanner printed something other than JSON (${python}): ${r.stdout.slice(0, 200)}.`);
  }
}

/** The project's resources; scanner errors become one message naming file:line. */
export async function scanResources(python: string, projectDir: string): Promise<Resource[]> {
  return (await scanProject(python, projectDir)).resources;
}

/** The project's resources and what each resource's file imports (top-level package names). */
export async function scanProject(
  python: string,
  projectDir: string,
): Promise<{ resources: Resource[]; imports: Record<string, string[]> }> {
  const answer = (await runScanner(python, [projectDir])) as {
    resources?: Resource[];
    errors?: ScanError[];
    imports?: Record<string, string[]>;
  };
  const errors = answer.errors ?? [];
  if (errors.length > 0) {
    const [first, ...rest] = errors;
    const more =
      rest.length > 0 ? ` (and ${rest.length} more: ${rest.map((e) => `${e.file}:${e.line}`).join(', ')})` : '';
    throw new CliError(`${first!.file}:${first!.line}: ${first!.message}${more}`);
  }
  const resources = answer.resources ?? [];
  if (resources.length === 0) {
    throw new CliError(
      'No resources found: decorate a function with @endpoint(name=...) or create an Endpoint(name=...) (see `gantry init`).',
    );
  }
  return { resources, imports: answer.imports ?? {} };
}

/** The project's files that the ignore rules let through, relative and '/'-separated. */
export async function projectFiles(python: string, projectDir: string): Promise<string[]> {
  const answer = (await runScanner(python, ['--files', projectDir])) as { files?: string[] };
  return answer.files ?? [];
}
