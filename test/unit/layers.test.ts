/**
 * The layers point one way (docs/architecture.md): each top folder may import only the folders
 * below it. Read from the source files' import statements, so a new import that crosses a layer
 * fails here, naming the file and the import.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** What each layer may import (besides itself, npm packages and Node's modules). Every top folder is listed. */
const ALLOWED: Record<string, readonly string[]> = {
  // SSH and container-runtime commands: a library of its own.
  hostctl: [],
  // Workflow ids, signals, updates, queries and search attributes: a leaf every layer may import.
  contracts: [],
  // Plain rules and records over PostgreSQL and Temporal's client, one folder per business area.
  domain: ['hostctl', 'contracts', 'generated'],
  // Side effects the workflows call, one file per calling workflow.
  activities: ['domain', 'hostctl', 'contracts', 'generated'],
  // HTTP and GraphQL skins over the domain.
  api: ['domain', 'contracts', 'generated'],
  // Deterministic workflow code: values only from workflows/, contracts/ and the pure scaling math.
  workflows: [],
  // The Temporal worker process: workflows and activities registered on Gantry's task queues.
  workers: ['activities', 'workflows', 'domain', 'contracts', 'hostctl', 'generated'],
  // The composition root: configuration, servers, the platform.
  infra: ['api', 'workers', 'domain', 'activities', 'workflows', 'contracts', 'hostctl', 'generated'],
  // What runs before the platform (Node runtime, install steps, the migration command).
  tooling: ['infra'],
  // The `gantry` command-line tool: its own package, talks to the platform over HTTP only.
  cli: [],
  // Benchmarks: may start anything, including the test machinery.
  bench: [
    'infra',
    'workers',
    'api',
    'domain',
    'activities',
    'workflows',
    'contracts',
    'hostctl',
    'generated',
    'test',
    'cli',
    'tooling',
  ],
  // The suite: may reach everything.
  test: [
    'infra',
    'workers',
    'api',
    'domain',
    'activities',
    'workflows',
    'contracts',
    'hostctl',
    'generated',
    'cli',
    'tooling',
    'bench',
  ],
};

/** Top folders that hold no TypeScript of the platform (checked below: a new top folder must be placed). */
const NOT_LAYERS = new Set([
  'node_modules',
  'generated',
  'prisma',
  'sdk',
  'docs',
  '.git',
  '.gantry',
  '.ci',
  'coverage',
]);

/** Pure modules of other layers that workflow code may import as values (no I/O, no clock). */
const WORKFLOW_VALUE_IMPORTS = new Set(['domain/endpoints/scaling.ts']);
/** Folders whose values workflow code may import (deterministic, bundled with the workflows). */
const WORKFLOW_VALUE_LAYERS = new Set(['contracts']);

/** Installed or built folders inside a layer (the cli package's own). */
const SKIPPED_DIRS = new Set(['node_modules', 'dist', 'python']);

function sources(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) return SKIPPED_DIRS.has(e.name) ? [] : sources(rel);
    return /\.(ts|mts|mjs)$/.test(e.name) && !e.name.endsWith('.d.mts') ? [rel] : [];
  });
}

interface Import {
  specifier: string;
  typeOnly: boolean;
}

function importsOf(file: string): Import[] {
  const text = readFileSync(path.join(root, file), 'utf8');
  const found: Import[] = [];
  for (const m of text.matchAll(/^\s*(import|export)\s+(type\s+)?([^'";]*?\s+from\s+)?['"]([^'"]+)['"]/gm)) {
    const clause = m[3] ?? '';
    // `import { type A, type B } from` is type-only too.
    const named = /^\{([^}]*)\}\s+from\s+$/.exec(clause.trim() + ' ');
    const allTypes = named ? named[1]!.split(',').every((n) => !n.trim() || n.trim().startsWith('type ')) : false;
    found.push({ specifier: m[4]!, typeOnly: Boolean(m[2]) || allTypes });
  }
  return found;
}

describe('layers', () => {
  it('import only downwards', () => {
    const violations: string[] = [];
    for (const layer of Object.keys(ALLOWED)) {
      for (const file of sources(layer)) {
        for (const imp of importsOf(file)) {
          if (!imp.specifier.startsWith('.')) continue;
          const target = path.relative(root, path.resolve(root, path.dirname(file), imp.specifier));
          const targetLayer = target.split(path.sep)[0]!;
          if (targetLayer === layer) continue;
          if (layer === 'workflows') {
            if (imp.typeOnly || WORKFLOW_VALUE_IMPORTS.has(target) || WORKFLOW_VALUE_LAYERS.has(targetLayer)) continue;
            violations.push(
              `${file}: imports ${target} (workflow code imports values from workflows/ and contracts/ only)`,
            );
            continue;
          }
          if (!ALLOWED[layer]!.includes(targetLayer))
            violations.push(
              `${file}: imports ${target} (${layer}/ may import ${ALLOWED[layer]!.join(', ') || 'nothing of the project'})`,
            );
        }
      }
    }
    expect(violations).toEqual([]);
  });

  it('cover every top folder of code', () => {
    // A folder without TypeScript is no layer: a Python project a reader made in the clone
    // (`gantry init shop`) or a tool's output must not fail the suite.
    const unplaced = readdirSync(root, { withFileTypes: true })
      .filter((e) => e.isDirectory() && !NOT_LAYERS.has(e.name) && !(e.name in ALLOWED))
      .filter((e) => sources(e.name).length > 0)
      .map((e) => e.name);
    expect(unplaced, 'a new top folder needs its place in ALLOWED (or NOT_LAYERS) and in docs/architecture.md').toEqual(
      [],
    );
  });

  it("keep the design card's top level", () => {
    // The folders the project started from; others stand beside them, never instead.
    const card = ['package.json', 'prisma', 'workflows', 'activities', 'api', 'workers', 'infra', 'test', 'README.md'];
    const top = new Set(readdirSync(root));
    expect(card.filter((name) => !top.has(name))).toEqual([]);
    // workers/ is the Temporal worker process, and the composition root builds it from there.
    expect(sources('workers')).toContain(path.join('workers', 'temporal-worker.ts'));
    expect(importsOf(path.join('infra', 'platform.ts')).map((i) => i.specifier)).toContain(
      '../workers/temporal-worker.ts',
    );
  });

  it('reach a domain area through its index.ts from outside domain/', () => {
    const deep: string[] = [];
    for (const layer of Object.keys(ALLOWED)) {
      if (layer === 'domain' || layer === 'workflows') continue;
      for (const file of sources(layer)) {
        for (const imp of importsOf(file)) {
          if (!imp.specifier.startsWith('.')) continue;
          const target = path.relative(root, path.resolve(root, path.dirname(file), imp.specifier)).split(path.sep);
          // domain/<area>/<file>: only index.ts is the area's public face.
          if (target[0] === 'domain' && target.length === 3 && target[2] !== 'index.ts')
            deep.push(`${file}: imports ${target.join('/')}`);
        }
      }
    }
    expect(deep).toEqual([]);
  });

  it('keep domain/ in feature folders, each with its index.ts', () => {
    const entries = readdirSync(path.join(root, 'domain'), { withFileTypes: true });
    // The context every operation takes and the errors every skin maps are the only shared top-level files.
    expect(
      entries
        .filter((e) => e.isFile())
        .map((e) => e.name)
        .sort(),
    ).toEqual(['context.ts', 'errors.ts']);
    const withoutIndex = entries
      .filter((e) => e.isDirectory() && !readdirSync(path.join(root, 'domain', e.name)).includes('index.ts'))
      .map((e) => e.name);
    expect(withoutIndex).toEqual([]);
  });

  it('keep every source file under 600 lines', () => {
    const long = Object.keys(ALLOWED)
      .flatMap((layer) => sources(layer))
      .filter((file) => !file.startsWith(path.join('test', 'replay', 'histories')))
      .map((file) => ({ file, text: readFileSync(path.join(root, file), 'utf8') }))
      // Generated files (their first line says so, and a test checks they match their generator) are read by tools.
      .filter((f) => !f.text.startsWith('// generated by '))
      .map((f) => ({ file: f.file, lines: f.text.split('\n').length }))
      .filter((f) => f.lines > 600)
      .map((f) => `${f.file}: ${f.lines} lines`);
    expect(long).toEqual([]);
  });
});
