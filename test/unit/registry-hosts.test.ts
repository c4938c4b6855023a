/**
 * No package registry's host is written in the repository: packages come by name through each
 * registry's usual client, and a mirror comes from the machine's configuration (apt's sources,
 * GOPROXY, npm's registry setting) or a setting. Lock files, which record where each package came
 * from, are the exception.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The hosts, written in parts so that this file does not name them either. */
const REGISTRY_HOSTS = [
  ['registry', 'npmjs', 'org'],
  ['registry', 'yarnpkg', 'com'],
  ['pypi', 'org'],
  ['files', 'pythonhosted', 'org'],
  ['deb', 'debian', 'org'],
  ['ftp', 'debian', 'org'],
  ['security', 'debian', 'org'],
  ['snapshot', 'debian', 'org'],
  ['proxy', 'golang', 'org'],
  ['sum', 'golang', 'org'],
  ['crates', 'io'],
  ['repo', 'maven', 'apache', 'org'],
  ['repo1', 'maven', 'org'],
  ['central', 'sonatype', 'com'],
].map((parts) => parts.join('.'));

/** Files that record where each package came from. */
const LOCK_FILE =
  /(^|\/)(package-lock\.json|npm-shrinkwrap\.json|yarn\.lock|pnpm-lock\.yaml|Cargo\.lock|go\.sum|poetry\.lock|uv\.lock)$/;

/** Where a host is named, as `file:line: host`. */
function registryHostsIn(file: string, text: string): string[] {
  const found: string[] = [];
  const lower = text.toLowerCase();
  for (const host of REGISTRY_HOSTS) {
    // A host, not a longer name that ends or starts with it.
    const pattern = new RegExp(`(^|[^a-z0-9.-])${host.replaceAll('.', '\\.')}($|[^a-z0-9-])`, 'g');
    for (const m of lower.matchAll(pattern)) {
      const line = lower.slice(0, m.index).split('\n').length;
      found.push(`${file}:${line}: ${host}`);
    }
  }
  return found;
}

describe('registry hosts', () => {
  it('are found where they are written', () => {
    const [npm, , , , debian] = REGISTRY_HOSTS;
    expect(registryHostsIn('a.ts', `const u = 'https://${npm}/x';\nconst m = "http://${debian}/debian";`)).toEqual([
      `a.ts:1: ${npm}`,
      `a.ts:2: ${debian}`,
    ]);
    expect(registryHostsIn('b.ts', `see my${npm}x or ${npm}-mirror.example`)).toEqual([]);
  });

  it('appear in no tracked file but lock files', () => {
    const files = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' })
      .split('\0')
      .filter((f) => f && !LOCK_FILE.test(f));
    expect(files.length).toBeGreaterThan(100);
    const found = files.flatMap((file) => {
      let text: string;
      try {
        text = readFileSync(path.join(root, file), 'utf8');
      } catch {
        return []; // listed but not in this checkout (a removed file not yet committed)
      }
      return text.includes('\0') ? [] : registryHostsIn(file, text);
    });
    expect(found).toEqual([]);
  });
});
