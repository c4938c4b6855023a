/**
 * The Debian mirror debootstrap fetches from (hostctl/python-base.ts): GANTRY_DEBIAN_MIRROR when
 * set, else the archive that apt on the machine already uses, read from its sources (deb822
 * `*.sources` files and one-line `sources.list` entries), on this machine or on a host over SSH. No
 * archive is assumed: a machine whose apt names no Debian archive must say which mirror to use.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export interface AptSource {
  types: string[];
  uris: string[];
  suites: string[];
  components: string[];
  enabled: boolean;
}

/** The entries of a deb822 `.sources` file (stanzas separated by blank lines; `#` comments). */
export function parseDeb822Sources(text: string): AptSource[] {
  const stanzas = text
    .split(/\n\s*\n/)
    .map((stanza) => stanza.split('\n').filter((line) => !line.trimStart().startsWith('#')))
    .filter((lines) => lines.some((l) => l.trim()));
  return stanzas.map((lines) => {
    const fields = new Map<string, string>();
    let last: string | undefined;
    for (const line of lines) {
      if (/^\s/.test(line) && last) {
        // A continuation line (Signed-By may hold a whole key).
        fields.set(last, `${fields.get(last)} ${line.trim()}`);
        continue;
      }
      const m = /^([A-Za-z0-9-]+):\s*(.*)$/.exec(line);
      if (!m) continue;
      last = m[1]!.toLowerCase();
      fields.set(last, m[2]!.trim());
    }
    const words = (name: string): string[] => (fields.get(name) ?? '').split(/\s+/).filter(Boolean);
    return {
      types: words('types'),
      uris: words('uris'),
      suites: words('suites'),
      components: words('components'),
      enabled: (fields.get('enabled') ?? 'yes').toLowerCase() !== 'no',
    };
  });
}

/** The entries of a one-line `sources.list` (`deb [options] uri suite component...`). */
export function parseOneLineSources(text: string): AptSource[] {
  const found: AptSource[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*$/, '').trim();
    const m = /^(deb|deb-src)\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)(?:\s+(.*))?$/.exec(line);
    if (!m) continue;
    found.push({
      types: [m[1]!],
      uris: [m[2]!],
      suites: [m[3]!],
      components: (m[4] ?? '').split(/\s+/).filter(Boolean),
      enabled: true,
    });
  }
  return found;
}

const isHttp = (uri: string): boolean => /^https?:\/\//.test(uri);

/**
 * The archive among apt's sources that serves a Debian release's own suite (`bookworm`, not
 * `bookworm-security` or `bookworm-updates`) with `main`: the one that holds every release's
 * packages, trixie's as well as bookworm's. The machine's own release (`codename`) picks it among
 * other vendors' entries with a `main` component.
 */
export function mirrorFromSources(sources: readonly AptSource[], codename: string | undefined): string | undefined {
  const candidates = sources.filter(
    (s) => s.enabled && s.types.includes('deb') && s.components.includes('main') && s.uris.some(isHttp),
  );
  const chosen = codename
    ? candidates.find((s) => s.suites.includes(codename))
    : candidates.find((s) => s.suites.some((suite) => /^[a-z]+$/.test(suite)));
  return chosen?.uris.find(isHttp)?.replace(/\/+$/, '');
}

/** This machine's Debian release (`VERSION_CODENAME` of os-release), if it is one. */
export function debianCodename(osRelease = '/etc/os-release'): string | undefined {
  try {
    const text = readFileSync(osRelease, 'utf8');
    return /^VERSION_CODENAME="?([a-z]+)"?$/m.exec(text)?.[1];
  } catch {
    return undefined;
  }
}

/** The entries of apt's source files, given as (file name, text) in apt's own order. */
export function parseAptSourceFiles(files: ReadonlyArray<{ name: string; text: string }>): AptSource[] {
  const found: AptSource[] = [];
  for (const { name, text } of files) {
    if (name.endsWith('.sources')) found.push(...parseDeb822Sources(text));
    else if (name.endsWith('.list')) found.push(...parseOneLineSources(text));
  }
  return found;
}

/** apt's sources on this machine, in apt's own order: sources.list first, then sources.list.d. */
export function aptSources(etcApt = '/etc/apt'): AptSource[] {
  const read = (file: string): string => {
    try {
      return readFileSync(file, 'utf8');
    } catch {
      return '';
    }
  };
  let parts: string[] = [];
  try {
    parts = readdirSync(path.join(etcApt, 'sources.list.d')).sort();
  } catch {
    // no sources.list.d
  }
  return parseAptSourceFiles([
    { name: 'sources.list', text: read(path.join(etcApt, 'sources.list')) },
    ...parts.map((name) => ({ name, text: read(path.join(etcApt, 'sources.list.d', name)) })),
  ]);
}

/**
 * A host's release and apt sources, printed by HOST_APT_SOURCES_COMMAND: `codename <name>`, then
 * each file as `@@file <name>` followed by its text.
 */
export const HOST_APT_SOURCES_COMMAND =
  '. /etc/os-release 2>/dev/null; echo "codename ${VERSION_CODENAME:-}"; ' +
  'for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do ' +
  '[ -f "$f" ] && { echo "@@file ${f##*/}"; cat "$f"; echo; }; done; true';

/** The mirror among a host's sources (HOST_APT_SOURCES_COMMAND's output), if it names one. */
export function mirrorFromHostSources(output: string): string | undefined {
  const codename = /^codename ([a-z]*)$/m.exec(output)?.[1] || undefined;
  const files = output
    .split(/^@@file /m)
    .slice(1)
    .map((part) => {
      const newline = part.indexOf('\n');
      return { name: part.slice(0, newline).trim(), text: part.slice(newline + 1) };
    });
  return mirrorFromSources(parseAptSourceFiles(files), codename);
}

export function debianMirror(
  env: NodeJS.ProcessEnv = process.env,
  etcApt = '/etc/apt',
  codename = debianCodename(),
): string {
  const set = env.GANTRY_DEBIAN_MIRROR?.trim();
  if (set) return set.replace(/\/+$/, '');
  const mirror = mirrorFromSources(aptSources(etcApt), codename);
  if (!mirror)
    throw new Error(
      `no Debian archive among apt's sources in ${etcApt}: set GANTRY_DEBIAN_MIRROR to the mirror debootstrap should use`,
    );
  return mirror;
}
