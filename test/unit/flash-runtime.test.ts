/**
 * The flash runtime's entry point (sdk/flash-runtime/gantry_flash) has its own unittest suite,
 * standard library only; this runs it with the machine's python3 so `npm test` covers it.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');

it('passes its unittest suite', async () => {
  const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve, reject) => {
    // No .pyc files in the working tree; -b keeps the runtime's log lines out of passing tests.
    const child = spawn('python3', ['-m', 'unittest', 'discover', '-b', '-s', 'sdk/flash-runtime/tests'], {
      cwd: root,
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', reject);
    child.once('close', (c) => resolve({ code: c, output: out }));
  });
  expect(code, output.slice(-4000)).toBe(0);
  expect(output).toMatch(/Ran \d+ tests/);
}, 120_000);
