/** Where debootstrap's mirror comes from: a setting, else apt's own sources; never a host written here. */
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { debianMirror, mirrorFromSources, parseDeb822Sources, parseOneLineSources } from '../support/debian-mirror.ts';

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
});
