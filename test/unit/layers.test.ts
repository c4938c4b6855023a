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

/** What each layer may import (besides itself, npm packages and Node's modules). */
const ALLOWED: Record<string, readonly string[]> = {
  // SSH and container-runtime commands: a library of its own.
  hostctl: [],
  // Plain rules and records over PostgreSQL and Temporal's client; workflow contracts (names, ids).
  domain: ['hostctl', 'workflows', 'generated'],
  // Side effects the workflows call.
  activities: ['domain', 'hostctl', 'workflows', 'generated'],
  // HTTP and GraphQL skins over the domain.
  api: ['domain', 'workflows', 'generated'],
  // Deterministic workflow code: values only from workflows/ and the pure scaling math.
  workflows: [],
  // The Temporal worker process: activities and workflow code.
  workers: ['activities', 'domain', 'workflows', 'generated', 'hostctl'],
};

/** Pure modules of other layers that workflow code may import as values (no I/O, no clock). */
const WORKFLOW_VALUE_IMPORTS = new Set(['domain/scaling.ts']);

function sources(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) return sources(rel);
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
            if (imp.typeOnly || WORKFLOW_VALUE_IMPORTS.has(target)) continue;
            violations.push(`${file}: imports ${target} (workflow code imports values from workflows/ only)`);
            continue;
          }
          if (!ALLOWED[layer]!.includes(targetLayer)) violations.push(`${file}: imports ${target} (${layer}/ may import ${ALLOWED[layer]!.join(', ') || 'nothing of the project'})`);
        }
      }
    }
    expect(violations).toEqual([]);
  });
});
