/**
 * Every installed package that runs code at install time is reviewed in package.json's
 * `allowScripts` (npm 11.16 and later list the others after each install, and npm 12 blocks them).
 * Read from node_modules as npm lays it out, so a new dependency with an install script fails here.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall'];

/** Names of the packages under `dir` (scoped ones as @scope/name), nested node_modules included. */
function packagesWithInstallScripts(dir: string, found = new Set<string>()): Set<string> {
  if (!existsSync(dir)) return found;
  for (const entry of readdirSync(dir)) {
    if (entry.startsWith('.')) continue;
    const full = path.join(dir, entry);
    if (entry.startsWith('@')) {
      for (const scoped of readdirSync(full)) visit(path.join(full, scoped), found);
    } else visit(full, found);
  }
  return found;
}

function visit(pkgDir: string, found: Set<string>): void {
  const manifest = path.join(pkgDir, 'package.json');
  if (!existsSync(manifest)) return;
  const pkg = JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string; scripts?: Record<string, string> };
  // A binding.gyp without an install script is built by npm itself (node-gyp rebuild).
  const runs = INSTALL_SCRIPTS.some((s) => pkg.scripts?.[s]) || existsSync(path.join(pkgDir, 'binding.gyp'));
  if (runs && pkg.name) found.add(pkg.name);
  packagesWithInstallScripts(path.join(pkgDir, 'node_modules'), found);
}

it("reviews every installed package's install scripts in allowScripts", () => {
  const allow =
    (
      JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
        allowScripts?: Record<string, boolean>;
      }
    ).allowScripts ?? {};
  const reviewed = new Set(Object.keys(allow).map((k) => k.replace(/(.)@[^@/]+$/, '$1')));
  const installed = packagesWithInstallScripts(path.join(ROOT, 'node_modules'));
  expect(installed.size).toBeGreaterThan(0);
  expect([...installed].filter((name) => !reviewed.has(name)).sort()).toEqual([]);
});
