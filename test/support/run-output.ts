/**
 * A command run to its end without blocking the event loop (builds take minutes, and vitest's worker
 * must go on answering meanwhile): its exit status and the end of what it printed on both streams.
 */
import { spawn } from 'node:child_process';

export function runForOutput(
  cmd: string,
  args: readonly string[],
  opts: { cwd?: string; keepChars?: number } = {},
): Promise<{ status: number | null; output: string }> {
  const keepChars = opts.keepChars ?? 200_000;
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (d: string) => (output = (output + d).slice(-keepChars));
    child.stdout.setEncoding('utf8').on('data', keep);
    child.stderr.setEncoding('utf8').on('data', keep);
    child.once('error', (e) => reject(new Error(`${cmd}: ${e.message}`)));
    child.once('close', (status) => resolve({ status, output }));
  });
}
