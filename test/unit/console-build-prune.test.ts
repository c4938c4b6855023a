import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { pruneConsoleBuilds } from '../../api/console/build.ts';

describe('pruneConsoleBuilds', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'gantry-console-prune-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('keeps the current build and the three newest others, and drops half-builds older than an hour', () => {
    const now = Date.now();
    const make = (name: string, ageMs: number) => {
      const dir = path.join(root, name);
      mkdirSync(dir);
      const t = (now - ageMs) / 1000;
      utimesSync(dir, t, t);
    };
    make('current', 10 * 86_400_000); // oldest of all, still kept: it is the one being served
    for (let i = 1; i <= 5; i++) make(`b${i}`, i * 60_000);
    make('b9.tmp-1-aa', 2 * 3_600_000);
    make('b8.tmp-2-bb', 60_000);
    const removed = pruneConsoleBuilds(root, path.join(root, 'current'), now).map((d) => path.basename(d));
    expect(removed.sort()).toEqual(['b4', 'b5', 'b9.tmp-1-aa']);
    expect(readdirSync(root).sort()).toEqual(['b1', 'b2', 'b3', 'b8.tmp-2-bb', 'current']);
  });
});
