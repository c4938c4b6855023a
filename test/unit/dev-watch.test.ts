/**
 * `gantry dev`'s file watcher (cli/src/commands/dev/watch.ts) on a real folder: every way an editor
 * saves is seen, also after a rename-save (Node's recursive fs.watch loses the file there), and a
 * burst of saves is one batch.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { DEBOUNCE_MS, watchProject, type Watcher } from '../../cli/src/commands/dev/watch.ts';

let dir: string;
let watcher: Watcher | undefined;
afterEach(() => {
  watcher?.close();
  rmSync(dir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

it('sees in-place writes, rename-saves, the saves after them, deletes, re-creates and new folders; never .venv', async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'gantry-watch-'));
  writeFileSync(path.join(dir, 'a.py'), '1');
  mkdirSync(path.join(dir, '.venv'));
  const batches: string[][] = [];
  watcher = watchProject(
    dir,
    (paths) => batches.push([...paths].sort()),
    (err) => {
      throw err;
    },
  );
  await sleep(500);
  const step = async (what: string, act: () => void, expected: string[]) => {
    act();
    const deadline = Date.now() + 5000;
    while (batches.length === 0 && Date.now() < deadline) await sleep(20);
    await sleep(DEBOUNCE_MS * 2);
    // The temporary file of a rename-save may or may not be seen; the saved file always is.
    expect(
      batches
        .splice(0)
        .flat()
        .filter((p) => !p.endsWith('.swp')),
      what,
    ).toEqual(expected);
  };
  const file = path.join(dir, 'a.py');
  await step('in place', () => writeFileSync(file, '2'), ['a.py']);
  await step(
    'rename-save',
    () => {
      writeFileSync(path.join(dir, '.a.py.swp'), '3');
      renameSync(path.join(dir, '.a.py.swp'), file);
    },
    ['a.py'],
  );
  await step('in place after a rename-save', () => writeFileSync(file, '4'), ['a.py']);
  await step('delete', () => unlinkSync(file), ['a.py']);
  await step('re-create', () => writeFileSync(file, '5'), ['a.py']);
  await step('in place after a re-create', () => writeFileSync(file, '6'), ['a.py']);
  await step(
    'a new folder and a file in it',
    () => {
      mkdirSync(path.join(dir, 'pkg'));
      writeFileSync(path.join(dir, 'pkg', 'b.py'), '1');
    },
    ['pkg', 'pkg/b.py'],
  );
  // A burst of saves is one batch.
  await step(
    'a burst',
    () => {
      for (let i = 0; i < 20; i++) writeFileSync(file, String(i));
    },
    ['a.py'],
  );
  // Nothing from folders that never hold source.
  writeFileSync(path.join(dir, '.venv', 'x.py'), '1');
  await sleep(DEBOUNCE_MS * 4);
  expect(batches).toEqual([]);
});
