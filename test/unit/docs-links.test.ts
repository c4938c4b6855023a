/**
 * The manual's links hold: every relative link in README.md and docs/ names a file that exists and,
 * with a #fragment, a heading of that file (GitHub's anchor rules). The README stays an entry page:
 * short, and linking every page under docs/.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const README_MAX_LINES = 250;

function markdownUnder(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) return markdownUnder(rel);
    return e.name.endsWith('.md') ? [rel] : [];
  });
}

const docsPages = markdownUnder('docs').sort();
const pages = ['README.md', ...docsPages];

/** The text outside fenced code blocks, line by line (fenced lines become empty, so numbers hold). */
function proseLines(text: string): string[] {
  let fence: string | undefined;
  return text.split('\n').map((line) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined;
      return '';
    }
    return fence === undefined ? line : '';
  });
}

/** GitHub's heading anchor: inline markup dropped, lowercase, punctuation but - and _ dropped, spaces to -. */
function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

const anchorCache = new Map<string, Set<string>>();
/** Every anchor a markdown file's headings give, repeated headings numbered as GitHub numbers them. */
function anchorsOf(file: string): Set<string> {
  const cached = anchorCache.get(file);
  if (cached) return cached;
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(readFileSync(file, 'utf8'))) {
    const m = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  anchorCache.set(file, anchors);
  return anchors;
}

interface Link {
  page: string;
  line: number;
  target: string;
}

/** Every markdown link and image of a page, outside code (fenced blocks and inline code spans). */
function linksOf(page: string): Link[] {
  const links: Link[] = [];
  proseLines(readFileSync(path.join(root, page), 'utf8')).forEach((line, i) => {
    const prose = line.replace(/(`+)[^`]*?\1/g, '');
    for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g))
      links.push({ page, line: i + 1, target: m[1]! });
  });
  return links;
}

/** Why a link does not resolve, or undefined when it does. External links are not followed. */
function problemOf(link: Link): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(link.target)) return undefined;
  const [filePart, fragment] = link.target.split('#', 2) as [string, string | undefined];
  const file =
    filePart === ''
      ? path.join(root, link.page)
      : path.resolve(root, path.dirname(link.page), decodeURIComponent(filePart));
  if (!file.startsWith(root + path.sep)) return 'points outside the repository';
  if (!existsSync(file)) return 'no such file';
  if (fragment === undefined) return undefined;
  if (!statSync(file).isFile() || !file.endsWith('.md')) return 'an anchor into something that is not a markdown file';
  return anchorsOf(file).has(fragment.toLowerCase()) ? undefined : `no heading with the anchor #${fragment}`;
}

describe('the manual', () => {
  it('has links that resolve: files exist and anchors name headings', () => {
    const broken = pages.flatMap(linksOf).flatMap((link) => {
      const problem = problemOf(link);
      return problem ? [`${link.page}:${link.line}: ${link.target}: ${problem}`] : [];
    });
    expect(broken).toEqual([]);
  });

  it('keeps the README an entry page that links every page under docs/', () => {
    const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
    expect(readme.trimEnd().split('\n').length).toBeLessThanOrEqual(README_MAX_LINES);
    const linked = new Set(linksOf('README.md').map((l) => path.normalize(l.target.split('#')[0]!)));
    expect(docsPages.filter((p) => !linked.has(p))).toEqual([]);
  });

  it('finds what it checks (the slug rules and the scan are not vacuous)', () => {
    expect(slug('`npm start`, step by step')).toBe('npm-start-step-by-step');
    expect(slug("An endpoint's settings: its row and its workflow")).toBe(
      'an-endpoints-settings-its-row-and-its-workflow',
    );
    expect(docsPages.length).toBeGreaterThan(0);
    expect(linksOf('README.md').length).toBeGreaterThan(docsPages.length - 1);
  });
});
