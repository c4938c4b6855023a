import ora, { type Ora } from 'ora';

/**
 * What the CLI says while it works goes to stderr, so stdout carries only results (and only JSON
 * with --json). A spinner when stderr is a terminal; plain lines otherwise, so CI logs and tests
 * read as a list of steps instead of a stream of escape codes.
 */
export interface Progress {
  /** Replaces the text of the step under way. */
  update(text: string): void;
  /** Ends the step as done, with a final text (default: the current one). */
  succeed(text?: string): void;
  /** Ends the step as failed. */
  fail(text?: string): void;
  /** A line of its own under the step (the spinner, if any, keeps turning below it). */
  log(line: string): void;
}

let active: Progress | undefined;

/**
 * With --json, what the CLI says while it works goes to stderr as JSON lines (`{"type": "step",
 * "status": "started", "text": ...}`, `{"type": "resource", ...}`), one event a line, for scripts;
 * stdout still carries the result alone.
 */
let jsonEvents = false;

export function emitJsonEvents(on: boolean): void {
  jsonEvents = on;
}

export const emittingJsonEvents = (): boolean => jsonEvents;

/** One event line on stderr (with --json), stamped with the time. */
export function event(type: string, fields: Record<string, unknown>): void {
  process.stderr.write(`${JSON.stringify({ type, time: new Date().toISOString(), ...fields })}\n`);
}

/** A terminal that reports no width (some bare ptys) would make the spinner redraw forever: plain lines there too. */
export const spinnerEnabled = (): boolean => Boolean(process.stderr.isTTY) && (process.stderr.columns ?? 0) > 0;

export function progress(text: string): Progress {
  active?.succeed();
  const step = jsonEvents ? eventProgress(text) : spinnerEnabled() ? spinnerProgress(text) : plainProgress(text);
  active = step;
  return step;
}

/** Called when an error ends the command, so a spinner does not keep turning over the message. */
export function failActiveProgress(): void {
  active?.fail();
  active = undefined;
}

function spinnerProgress(text: string): Progress {
  const spinner: Ora = ora({ text, stream: process.stderr }).start();
  const done = (finish: () => void): void => {
    if (!spinner.isSpinning) return;
    finish();
    if (active === step) active = undefined;
  };
  const step: Progress = {
    update: (t) => {
      spinner.text = t;
    },
    succeed: (t) => done(() => spinner.succeed(t)),
    fail: (t) => done(() => spinner.fail(t)),
    log: (line) => {
      spinner.clear();
      process.stderr.write(`${line}\n`);
      spinner.render();
    },
  };
  return step;
}

function eventProgress(text: string): Progress {
  let current = text;
  let open = true;
  event('step', { status: 'started', text });
  const end = (status: 'succeeded' | 'failed', t: string | undefined): void => {
    if (!open) return;
    open = false;
    event('step', { status, text: t ?? current });
    if (active === step) active = undefined;
  };
  const step: Progress = {
    update: (t) => {
      if (!open || t === current) return;
      current = t;
      event('step', { status: 'running', text: t });
    },
    succeed: (t) => end('succeeded', t),
    fail: (t) => end('failed', t),
    log: (line) => event('log', { text: line.trim() }),
  };
  return step;
}

function plainProgress(text: string): Progress {
  let current = text;
  let open = true;
  process.stderr.write(`${text}...\n`);
  const step: Progress = {
    update: (t) => {
      // Polling repeats the same text every second; a log needs it once.
      if (!open || t === current) return;
      current = t;
      process.stderr.write(`${t}...\n`);
    },
    succeed: (t) => {
      if (!open) return;
      open = false;
      if (t !== undefined && t !== current) process.stderr.write(`${t}\n`);
      if (active === step) active = undefined;
    },
    fail: (t) => {
      if (!open) return;
      open = false;
      if (t !== undefined) process.stderr.write(`${t}\n`);
      if (active === step) active = undefined;
    },
    log: (line) => {
      process.stderr.write(`${line}\n`);
    },
  };
  return step;
}

/** A remark on stderr (not part of the command's result). */
export function note(line: string): void {
  if (jsonEvents) event('note', { text: line });
  else process.stderr.write(`${line}\n`);
}

/** A line of the command's result on stdout. */
export function say(line = ''): void {
  process.stdout.write(`${line}\n`);
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Columns padded to their widest cell; the last column is not padded. */
export function table(headers: string[], rows: string[][]): string {
  const all = [headers, ...rows];
  const widths = headers.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return all
    .map((r) =>
      r
        .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** Decimal units, the ones the 1.5 GB limit is stated in. */
export function formatBytes(n: number): string {
  if (n < 1000) return `${n} B`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let value = n;
  let unit = 'B';
  for (const u of units) {
    if (value < 1000) break;
    value /= 1000;
    unit = u;
  }
  return `${value >= 100 ? value.toFixed(0) : value.toFixed(1)} ${unit}`;
}
