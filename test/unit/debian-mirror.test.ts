/** Where debootstrap's mirror comes from: a setting, else apt's own sources; never a host written here. */
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  debianMirror,
  mirrorFromHostSources,
  mirrorFromSources,
  parseDeb822Sources,
  parseOneLineSources,
} from '../../hostctl/apt-sources.ts';
import { isDebianPython, pythonBaseOf, pythonBaseRecipe } from '../../hostctl/python-base.ts';

const DEB822 = `Types: deb
# a comment between fields
URIs: http://mirror.test/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.test/debian-security
Suites: bookworm-security
Components: main
`;

describe("debootstrap's Debian mirror", () => {
  it('reads deb822 and one-line entries as apt does', () => {
    expect(parseDeb822Sources(DEB822)).toEqual([
      {
        types: ['deb'],
        uris: ['http://mirror.test/debian/'],
        suites: ['bookworm', 'bookworm-updates'],
        components: ['main'],
        enabled: true,
      },
      {
        types: ['deb'],
        uris: ['http://mirror.test/debian-security'],
        suites: ['bookworm-security'],
        components: ['main'],
        enabled: true,
      },
    ]);
    expect(
      parseOneLineSources('# old\ndeb [arch=amd64 signed-by=/k.gpg] https://m.test/debian bookworm main contrib\n'),
    ).toEqual([
      {
        types: ['deb'],
        uris: ['https://m.test/debian'],
        suites: ['bookworm'],
        components: ['main', 'contrib'],
        enabled: true,
      },
    ]);
  });

  it("picks the archive of the machine's release, not its security suite or another vendor's", () => {
    const vendor = parseOneLineSources('deb https://vendor.test/node nodistro main\n');
    const disabled = parseDeb822Sources(
      `Types: deb\nURIs: http://off.test/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n`,
    );
    const sources = [...vendor, ...disabled, ...parseDeb822Sources(DEB822)];
    expect(mirrorFromSources(sources, 'bookworm')).toBe('http://mirror.test/debian');
    expect(mirrorFromSources(parseDeb822Sources(DEB822).slice(1), 'bookworm')).toBeUndefined();
  });

  it('takes GANTRY_DEBIAN_MIRROR over apt, and says what to set when apt names none', () => {
    const etc = mkdtempSync(path.join(tmpdir(), 'apt-'));
    mkdirSync(path.join(etc, 'sources.list.d'));
    expect(debianMirror({ GANTRY_DEBIAN_MIRROR: 'http://set.test/debian/' }, etc, 'bookworm')).toBe(
      'http://set.test/debian',
    );
    expect(() => debianMirror({}, etc, 'bookworm')).toThrow(/set GANTRY_DEBIAN_MIRROR/);
    writeFileSync(path.join(etc, 'sources.list.d', 'debian.sources'), DEB822);
    writeFileSync(
      path.join(etc, 'sources.list.d', 'other.sources.disabled'),
      'Types: deb\nURIs: http://x.test\nSuites: bookworm\nComponents: main\n',
    );
    expect(debianMirror({}, etc, 'bookworm')).toBe('http://mirror.test/debian');
  });

  it("reads a host's release and sources as the command over SSH prints them", () => {
    const printed = `codename bookworm\n@@file sources.list\n\n@@file debian.sources\n${DEB822}\n@@file vendor.list\ndeb https://vendor.test/node nodistro main\n`;
    expect(mirrorFromHostSources(printed)).toBe('http://mirror.test/debian');
    // A release apt has no entry for: no mirror, and the caller says to set one.
    expect(mirrorFromHostSources(printed.replace('codename bookworm', 'codename trixie'))).toBeUndefined();
    expect(mirrorFromHostSources('codename \n')).toBeUndefined();
  });
});

describe("Debian's Python base recipe", () => {
  it('names, marks and scripts the build of a Python Debian ships, and knows which do', () => {
    expect(isDebianPython('3.11') && isDebianPython('3.13')).toBe(true);
    expect(isDebianPython('3.12')).toBe(false);
    expect(pythonBaseOf('localhost/gantry-python:3.13')).toBe('3.13');
    expect(pythonBaseOf('localhost/gantry-python:3.12')).toBeUndefined();
    expect(pythonBaseOf('localhost/gantry-python:3.11-python3-numpy')).toBeUndefined();
    const r = pythonBaseRecipe('3.11', 'http://mirror.test/debian', 'docker');
    expect(r.name).toBe('localhost/gantry-python:3.11');
    expect(r.args.slice(0, 5)).toEqual([
      r.name,
      'bookworm',
      'http://mirror.test/debian',
      'python3,ca-certificates',
      'docker',
    ]);
    expect(r.args).toContain(`ENV GANTRY_PYTHON_BASE_RECIPE=${r.hash}`);
    // The hash follows what goes in: another mirror or package set is another image.
    expect(pythonBaseRecipe('3.11', 'http://other.test/debian', 'docker').hash).not.toBe(r.hash);
    expect(pythonBaseRecipe('3.11', 'http://mirror.test/debian', 'podman').hash).toBe(r.hash);
    expect(pythonBaseRecipe('3.11', 'http://mirror.test/debian', 'docker', ['python3-numpy']).name).toBe(
      'localhost/gantry-python:3.11-python3-numpy',
    );
    // Without root or debootstrap the script says so (exit 90, 91) before it touches anything.
    expect(r.script).toMatch(/needs root/);
    expect(r.script).toMatch(/apt-get install debootstrap/);
  });
});
