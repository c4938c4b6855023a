/**
 * The Python package (sdk/python: decorators, scanner, runtime) has its own unittest suite,
 * standard library only; this runs it with the machine's python3 so `npm test` covers it. Its
 * runtime tests start processes and wait on them (about 30 s), so it runs with the integration
 * project, not `npm run test:unit`.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');

function run(cmd: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    // No .pyc files in the working tree; -b keeps the runtime's log lines out of passing tests.
    const child = spawn(cmd, args, {
      cwd: root,
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output }));
  });
}

it('passes its unittest suite', async () => {
  const { code, output } = await run('python3', ['-m', 'unittest', 'discover', '-b', '-s', 'sdk/python/tests']);
  if (code !== 0) console.error(output);
  expect(code, output.slice(-4000)).toBe(0);
  expect(output).toMatch(/Ran \d+ tests/);
}, 180_000);
