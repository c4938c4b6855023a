import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { readProjectConfig } from '../../project.ts';
import { sdkRoot } from '../../python.ts';
import type { Resource } from '../../scan.ts';

/** The environment `gantry dev` runs in; its endpoints are named `live-<resource>` (docs/dev-loop.md). */
export const LIVE_ENVIRONMENT = 'live';

export const stateDir = (projectDir: string): string => path.join(projectDir, '.gantry');
export const statePath = (projectDir: string): string => path.join(stateDir(projectDir), 'live.json');

export interface LiveResource {
  endpointId: string;
  url: string;
  kind: 'queue' | 'lb';
  /** configHash() of the manifest entry the endpoint was provisioned from. */
  configHash: string;
  /** The CLI's own addition: the build it was provisioned from (whose src/ it runs before any upload). */
  buildId?: string;
}

export interface LiveBuild {
  id: string;
  depsHash: string;
  sha256: string;
  /** The fingerprint of the build's src/ (manifest.fingerprint): the code an endpoint runs before any source upload. */
  fingerprint?: string;
  /** configHash() of every resource in the build's manifest: which resources it can provision as they are now. */
  resources?: Record<string, string>;
}

/** `.gantry/live.json` (docs/dev-loop.md "The CLI"); `source` is the CLI's own addition: the last upload. */
export interface LiveState {
  app: string;
  environment: typeof LIVE_ENVIRONMENT;
  build: LiveBuild | null;
  resources: Record<string, LiveResource>;
  source?: { version: number; fingerprint: string };
}

export const emptyState = (app: string): LiveState => ({
  app,
  environment: LIVE_ENVIRONMENT,
  build: null,
  resources: {},
});

/**
 * The saved state when it belongs to this app; anything unreadable or for another app (the project
 * was renamed) starts over: the platform is asked again anyway.
 */
export function readState(projectDir: string, app: string): LiveState {
  try {
    const data = JSON.parse(readFileSync(statePath(projectDir), 'utf8')) as Partial<LiveState>;
    if (
      data.app !== app ||
      data.environment !== LIVE_ENVIRONMENT ||
      typeof data.resources !== 'object' ||
      data.resources === null
    )
      return emptyState(app);
    return {
      app,
      environment: LIVE_ENVIRONMENT,
      build: data.build ?? null,
      resources: data.resources,
      ...(data.source ? { source: data.source } : {}),
    };
  } catch {
    return emptyState(app);
  }
}

/** Written whole and renamed into place, so an interrupted dev never leaves half a file. */
export function writeState(projectDir: string, state: LiveState): void {
  const dir = stateDir(projectDir);
  mkdirSync(dir, { recursive: true });
  // Per-developer state: keep it out of the user's git without touching their .gitignore.
  const gitignore = path.join(dir, '.gitignore');
  if (!existsSync(gitignore)) writeFileSync(gitignore, '*\n');
  const file = statePath(projectDir);
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(state, null, 2)}\n`);
  renameSync(tmp, file);
}

/** JSON with sorted keys, so a hash does not depend on the order the scanner wrote them in. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return `{${entries
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/**
 * What an endpoint is made from: the manifest entry less what only documents it (line, summary,
 * parameters, routes). Those change with every edit and reach the workers by a source upload;
 * hashing them would turn each edit into a new build and a restart. Dependencies are in depsHash.
 */
export function configHash(r: Resource): string {
  return sha256(
    canonical({
      name: r.name,
      kind: r.kind,
      file: r.file,
      function: r.function,
      object: r.object,
      compute: r.compute,
      workers: r.workers,
      idleTimeout: r.idleTimeout,
      scaler: r.scaler,
      timeout: r.timeout,
      env: r.env,
      pythonVersion: r.pythonVersion ?? null,
    }),
  );
}

/**
 * What deps/ is made from: the requirements file, every resource's dependencies, the Python
 * version (the declared ones and the local interpreter's, which the build falls back on) and the
 * gantry package the build copies in. Equal hashes: the last install can be reused.
 */
export function depsHash(projectDir: string, resources: Resource[], interpreter: string): string {
  let requirements = '';
  try {
    requirements = readFileSync(path.join(projectDir, 'requirements.txt'), 'utf8');
  } catch {
    // No requirements file: nothing from it.
  }
  const declared = [...new Set(resources.map((r) => r.pythonVersion).filter(Boolean))].sort();
  const configured = readProjectConfig(projectDir).pythonVersion ?? null;
  return sha256(
    canonical({
      requirements,
      dependencies: [...new Set(resources.flatMap((r) => r.dependencies ?? []))].sort(),
      declared,
      configured,
      // The build falls back on the local interpreter only when nothing is declared.
      interpreter: declared.length === 0 && configured === null ? interpreter : null,
      sdk: sdkDigest(),
    }),
  );
}

let sdkDigestMemo: string | undefined;
/** The gantry package's .py files: a new CLI (a new runtime) makes a new build. */
function sdkDigest(): string {
  if (sdkDigestMemo) return sdkDigestMemo;
  const dir = path.join(sdkRoot(), 'gantry');
  const hash = createHash('sha256');
  for (const name of readdirSync(dir)
    .filter((n) => n.endsWith('.py'))
    .sort())
    hash
      .update(name)
      .update('\0')
      .update(readFileSync(path.join(dir, name)))
      .update('\0');
  sdkDigestMemo = hash.digest('hex');
  return sdkDigestMemo;
}
