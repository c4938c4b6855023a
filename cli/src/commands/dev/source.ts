import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { create as createTar } from 'tar';
import { CliError } from '../../errors.ts';
import { formatBytes } from '../../output.ts';
import { projectFiles } from '../../scan.ts';

/** docs/dev-loop.md: a source upload is at most 50 MB. */
export const MAX_SOURCE_BYTES = 50_000_000;

/** One fixed timestamp: the same files give the same bytes (and the same sha256). */
const EPOCH = new Date(0);

export interface SourceSnapshot {
  files: string[];
  /** The build's algorithm (docs/apps.md `fingerprint`), so it compares with a manifest's. */
  fingerprint: string;
}

const sortBytes = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** What a build's src/ would hold now: the ignore rules' files, less `.env` (never shipped). */
export async function sourceFiles(python: string, projectDir: string): Promise<string[]> {
  return (await projectFiles(python, projectDir)).filter((rel) => path.posix.basename(rel) !== '.env').sort(sortBytes);
}

/** The files (listed now unless the caller just listed them) and their fingerprint. */
export async function snapshot(python: string, projectDir: string, listed?: string[]): Promise<SourceSnapshot> {
  const files = listed ? [...listed].sort(sortBytes) : await sourceFiles(python, projectDir);
  const hash = createHash('sha256');
  for (const rel of files)
    hash
      .update(rel)
      .update('\0')
      .update(await readFile(path.join(projectDir, ...rel.split('/'))))
      .update('\0');
  return { files, fingerprint: hash.digest('hex') };
}

/** The files as a gzip tar with the paths at its root (what the artifact's src/ holds), in memory. */
export async function sourceTarball(projectDir: string, files: string[]): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  const pack = createTar({ cwd: projectDir, gzip: true, portable: true, mtime: EPOCH, noDirRecurse: true }, files);
  for await (const chunk of pack) {
    const buf = Buffer.from(chunk as Uint8Array);
    size += buf.length;
    if (size > MAX_SOURCE_BYTES) {
      throw new CliError(
        `The source files are over ${formatBytes(MAX_SOURCE_BYTES)} compressed; list large data files in .gantryignore (dependencies belong in requirements.txt).`,
      );
    }
    chunks.push(buf);
  }
  return Buffer.concat(chunks);
}
